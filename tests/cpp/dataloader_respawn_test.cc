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

// `processes` worker processes, each 2 s long, busy 1 s producing 50 batches.
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
  // no steps: no epoch's first batch to measure
  EXPECT_FALSE(f[0].estimated_gain_pct.has_value());
  EXPECT_FALSE(f[0].gain_arithmetic.empty());
}

TEST(DataLoaderRespawn, MediumWhenWorkersStartFromScratch) {
  const std::vector<Finding> f = respawn(run_with({loader(2, false)}, 4, "spawn"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].estimated_gain_pct.has_value());  // medium by the start method alone
  EXPECT_EQ(f[0].severity, Severity::kMedium);
  EXPECT_NE(f[0].evidence[1].find("spawn/forkserver"), std::string::npos) << f[0].evidence[1];
}

// 3 epochs of 4 steps: each step waits 1 ms for data and computes 2 ms; the
// first step of the run waits 30 ms, the first of each later epoch `wait`.
void three_epochs(DiagnosisInput& in, int64_t wait_ns) {
  constexpr int64_t kMs = 1'000'000;
  in.steps.breakdown.ns[static_cast<int>(Phase::kData)] = 1 * kMs;
  in.steps.step_ns = 3 * kMs;
  in.steps.typical_ns = 3 * kMs;
  int64_t t = 0;
  for (int i = 0; i < 12; ++i) {
    Step st;
    const int64_t data = i == 0 ? 30 * kMs : i % 4 == 0 ? wait_ns : 1 * kMs;
    st.breakdown.ns[static_cast<int>(Phase::kData)] = data;
    st.breakdown.ns[static_cast<int>(Phase::kForward)] = 2 * kMs;
    st.start_ns = t;
    st.end_ns = t += data + 2 * kMs;
    in.steps.steps.push_back(st);
  }
}

TEST(DataLoaderRespawn, TheGainIsTheEpochsFirstWaitsBeyondABatch) {
  // GIVEN 2 fork workers started 3 times (6 processes, 50 batches in 1 s
  // each: 20 ms a batch), the epochs after the first waiting 40 ms for
  // their first batch
  DiagnosisInput in = run_with({loader(2, false)}, 6);
  three_epochs(in, 40'000'000);
  const std::vector<Finding> f = respawn(in);
  ASSERT_EQ(f.size(), 1u);
  // THEN (42 - 3 - (20 - 1)) ms x 2 restarts (each restart step beyond a
  // median step and beyond the first batch of a persistent worker's epoch)
  // = 40 ms of 30+2 + 2 x (40+2) + 9 x 3 =
  // 143 ms of steps: 28.0 %, worth a medium even with cheap fork starts
  ASSERT_TRUE(f[0].estimated_gain_pct.has_value()) << f[0].gain_arithmetic;
  EXPECT_NEAR(*f[0].estimated_gain_pct, 100.0 * 40 / 143, 1e-9);
  EXPECT_EQ(f[0].severity, Severity::kMedium);
  EXPECT_NE(f[0].evidence[2].find("2 epochs after the first (workers shut down, started again, first batch) took 40.0 ms"), std::string::npos) << f[0].evidence[2];
  // WHEN the restarts cost little: (24 - 3 - 19) x 2 = 4 ms of 107 ms, 3.7 %
  in.steps.steps.clear();
  three_epochs(in, 22'000'000);
  const std::vector<Finding> cheap = respawn(in);
  ASSERT_EQ(cheap.size(), 1u);
  ASSERT_TRUE(cheap[0].estimated_gain_pct.has_value());
  EXPECT_NEAR(*cheap[0].estimated_gain_pct, 100.0 * 4 / 107, 1e-9);
  EXPECT_EQ(cheap[0].severity, Severity::kLow);
  // WHEN the waits are no longer than a batch's production: nothing measured
  in.steps.steps.clear();
  three_epochs(in, 15'000'000);
  ASSERT_EQ(respawn(in).size(), 1u);
  EXPECT_FALSE(respawn(in)[0].estimated_gain_pct.has_value());
  // WHEN steps were lost from the window: not estimated
  in.steps.timeline_truncated = true;
  EXPECT_FALSE(respawn(in)[0].estimated_gain_pct.has_value());
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
