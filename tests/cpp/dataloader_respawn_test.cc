// dataloader_respawn: fires when a non-persistent DataLoader's worker
// processes ran more often than one start of every DataLoader makes, by at
// least one restart of that loader; not otherwise. Inputs are hand-built:
// the DataLoader facts and one ProcessInfo per worker process, as a live
// run's model has them (Run::processes without the main one).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

DataLoaderFacts loader(int64_t workers, bool persistent) {
  DataLoaderFacts d;
  d.num_workers = workers;
  d.persistent_workers = persistent;
  d.created_at = "train.py:31";
  return d;
}

// `processes` worker processes, each 2 s long with 50 batches.
DiagnosisInput run_with(std::vector<DataLoaderFacts> loaders, int processes, const std::string& start = "fork") {
  DiagnosisInput in;
  in.env.dataloaders = std::move(loaders);
  for (int i = 0; i < processes; ++i) {
    ProcessInfo p;
    p.pid = 1000 + i;
    p.worker_id = i % 2;
    p.start_method = start;
    p.wall_s = 2.0;
    p.busy_s = 1.0;
    p.batches = 50;
    in.workers.push_back(p);
  }
  return in;
}

// Through the registry, as diagnose() runs it.
std::vector<Finding> respawn(const DiagnosisInput& in) {
  std::vector<Finding> out;
  for (const Finding& f : run_detectors(in, Evidence::kCpu))
    if (f.id == "dataloader_respawn") out.push_back(f);
  return out;
}

TEST(DataLoaderRespawn, FiresFromOneRestartOfTheLoadersWorkers) {
  // GIVEN num_workers=2, not persistent: 2 processes are one start, 3 not
  // yet a restart of both, 4 (two epochs) are.
  EXPECT_TRUE(respawn(run_with({loader(2, false)}, 2)).empty());
  EXPECT_TRUE(respawn(run_with({loader(2, false)}, 3)).empty());
  const std::vector<Finding> f = respawn(run_with({loader(2, false)}, 6));
  ASSERT_EQ(f.size(), 1u);
  // THEN low (fork starts are cheap), with the counts and the loader named
  EXPECT_EQ(f[0].severity, Severity::kLow);
  EXPECT_NE(f[0].title.find("6 worker processes for 2 workers"), std::string::npos) << f[0].title;
  EXPECT_NE(f[0].evidence[0].find("4 were started again"), std::string::npos) << f[0].evidence[0];
  EXPECT_NE(f[0].evidence[0].find("train.py:31"), std::string::npos) << f[0].evidence[0];
  EXPECT_NE(f[0].evidence[1].find("2000 ms and produced 50 batches"), std::string::npos) << f[0].evidence[1];
  EXPECT_NE(f[0].recommendation.find("persistent_workers=True"), std::string::npos);
  EXPECT_FALSE(f[0].estimated_gain_pct.has_value());
  EXPECT_FALSE(f[0].gain_arithmetic.empty());
}

TEST(DataLoaderRespawn, MediumWhenWorkersStartFromScratch) {
  const std::vector<Finding> f = respawn(run_with({loader(2, false)}, 4, "spawn"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kMedium);
  EXPECT_NE(f[0].evidence[1].find("spawn/forkserver"), std::string::npos) << f[0].evidence[1];
}

TEST(DataLoaderRespawn, NotForPersistentWorkersOrNoWorkers) {
  EXPECT_TRUE(respawn(run_with({loader(2, true)}, 8)).empty());
  EXPECT_TRUE(respawn(run_with({loader(0, false)}, 0)).empty());
  EXPECT_TRUE(respawn(run_with({}, 4)).empty());  // workers without DataLoader facts: nothing to compare
}

TEST(DataLoaderRespawn, SeveralLoadersCountTogether) {
  // GIVEN train (4 workers) and validation (2), neither persistent: one
  // epoch starts 6 processes, which is no restart
  EXPECT_TRUE(respawn(run_with({loader(4, false), loader(2, false)}, 6)).empty());
  // ...7 is not yet a whole restart of the smaller one, 8 is
  EXPECT_TRUE(respawn(run_with({loader(4, false), loader(2, false)}, 7)).empty());
  EXPECT_EQ(respawn(run_with({loader(4, false), loader(2, false)}, 8)).size(), 1u);
  // A persistent train loader counts once; only validation restarts.
  EXPECT_TRUE(respawn(run_with({loader(4, true), loader(2, false)}, 7)).empty());
  EXPECT_EQ(respawn(run_with({loader(4, true), loader(2, false)}, 8)).size(), 1u);
}

}  // namespace
}  // namespace torchneck
