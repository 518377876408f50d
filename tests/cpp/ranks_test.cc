// Ranks side by side (analyze/ranks.h) on runs built by hand, where the
// truth is planted: which rank arrives late at each collective and by how
// much; the pairing of a rank's dispatcher ops with its backend's Works
// (model/collectives.h); and a job's folder read back (model/rank_folders.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "analyze/diagnosis.h"
#include "analyze/ranks.h"
#include "model/collectives.h"
#include "model/rank_folders.h"
#include "model/run_io.h"

namespace torchneck {
namespace {

constexpr int64_t kMs = 1'000'000;

// One rank of 20 steps of 100 ms. In each step the rank computes (an op on
// the main thread) until it arrives at one all-reduce; every rank's
// all-reduce completes 5 ms after the last arrival. LATE: how much later
// than rank 0's this rank arrives (it computes that much longer).
struct Job {
  std::vector<Run> runs;
  std::vector<StepAnalysis> steps;
};

Job job(const std::vector<int64_t>& late_ms) {
  Job j;
  int64_t latest = 0;
  for (int64_t l : late_ms) latest = std::max(latest, l);
  for (size_t r = 0; r < late_ms.size(); ++r) {
    torchneck::Run run;
    run.rank.rank = static_cast<int64_t>(r);
    run.rank.host = "h";
    run.strings = {"aten::mm", "c10d::allreduce_"};
    run.threads.resize(1);
    StepAnalysis sa;
    for (int64_t i = 0; i < 20; ++i) {
      const int64_t t0 = i * 100 * kMs;
      const int64_t arrive = t0 + (40 + late_ms[r]) * kMs;
      const int64_t done = t0 + (40 + latest + 5) * kMs;
      OpEvent op{};
      op.start_ns = t0;
      op.end_ns = arrive;
      op.name_id = 0;
      run.timeline.push_back(op);
      OpEvent after{};  // the optimizer, after the all-reduce completed
      after.start_ns = done;
      after.end_ns = t0 + 100 * kMs;
      run.timeline.push_back(after);
      run.collectives.push_back(CollectiveEvent{arrive, done, 4 << 20, 1, 0});
      Step s;
      s.start_ns = t0;
      s.end_ns = t0 + 100 * kMs;
      s.steady = i > 0;
      s.breakdown.ns[static_cast<int>(Phase::kBackward)] = 100 * kMs;
      sa.steps.push_back(s);
    }
    run.run.ending = run_ending_from_string("finished");
    j.runs.push_back(std::move(run));
    j.steps.push_back(std::move(sa));
  }
  return j;
}

RankAnalysis compare(const Job& j) {
  std::vector<const Run*> runs;
  std::vector<const StepAnalysis*> steps;
  for (size_t i = 0; i < j.runs.size(); ++i) {
    runs.push_back(&j.runs[i]);
    steps.push_back(&j.steps[i]);
  }
  return analyze_ranks(runs, steps);
}

std::vector<Finding> rank_findings(const RankAnalysis& a) {
  DiagnosisInput in;
  in.ranks = &a;
  return run_detectors(in, Evidence::kRanks);
}

TEST(Ranks, TheLateRankWaitsForNobodyAndTheOthersWaitForIt) {
  const RankAnalysis a = compare(job({0, 30}));
  ASSERT_EQ(a.ranks.size(), 2u);
  EXPECT_EQ(a.steps, 19u);
  EXPECT_EQ(a.matched, 20u);
  EXPECT_NEAR(a.ranks[0].wait_ns, 30.0 * kMs, 1);
  EXPECT_NEAR(a.ranks[1].wait_ns, 0, 1);
  EXPECT_NEAR(a.ranks[0].transfer_ns, 5.0 * kMs, 1);
  EXPECT_NEAR(a.ranks[1].compute_ns - a.ranks[0].compute_ns, 30.0 * kMs, 1);
  EXPECT_DOUBLE_EQ(a.ranks[1].last_share, 1.0);
  const std::vector<Finding> f = rank_findings(a);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "straggler");
  EXPECT_EQ(*f[0].rank, 1);
  EXPECT_EQ(f[0].cause, "compute");
  EXPECT_NEAR(*f[0].estimated_gain_pct, 30.0, 0.01);
}

TEST(Ranks, EqualRanksNameNobody) {
  EXPECT_TRUE(rank_findings(compare(job({0, 0, 0}))).empty());
  EXPECT_TRUE(rank_findings(compare(job({0, 12}))).empty());  // 12 % of the step: one machine's noise
}

TEST(Ranks, AHostsClocksAreAlignedOnTheCompletions) {
  Job j = job({0, 30});
  const int64_t skew = 7'000 * kMs;  // another machine's clock
  j.runs[1].rank.host = "other";
  for (auto& c : j.runs[1].collectives) c.start_ns += skew, c.end_ns += skew;
  for (auto& e : j.runs[1].timeline) e.start_ns += skew, e.end_ns += skew;
  for (auto& s : j.steps[1].steps) s.start_ns += skew, s.end_ns += skew;
  const RankAnalysis a = compare(j);
  EXPECT_EQ(a.clock_offset_ns[1], -skew);
  EXPECT_NEAR(a.ranks[0].wait_ns, 30.0 * kMs, 1);
  EXPECT_NE(a.clock.find("aligned"), std::string::npos);
}

TEST(Ranks, TheFirstRankToFailIsNamed) {
  Job j = job({0, 0});
  j.runs[1].run.ending = run_ending_from_string("exception");
  j.runs[1].run.exit_code = 1;
  j.runs[1].run.wall_s = 1.0;
  j.runs[0].run.ending = run_ending_from_string("SIGTERM");
  j.runs[0].run.wall_s = 2.0;
  const RankAnalysis a = compare(j);
  EXPECT_EQ(a.first_failure, 1);
  EXPECT_NE(a.failure.find("rank 1 failed first: exception"), std::string::npos) << a.failure;
}

std::string_view name_of(uint32_t id, const void* ctx) {
  return (*static_cast<const std::vector<std::string>*>(ctx))[id];
}

TEST(Collectives, EachOpTakesTheNextWorkOfItsKind) {
  const std::vector<std::string> names = {"c10d::allreduce_", "c10d::send", "gloo:all_reduce", "gloo:send",
                                          "gloo:all_gather"};
  // allreduce issued at 10, send at 20; the send's Work starts at once (20),
  // the all-reduce's only when a worker takes it (25); one Work without an op.
  std::vector<CollectivePiece> ops = {{10, 11, -1, 0, 0}, {20, 21, -1, 1, 0}};
  std::vector<CollectivePiece> works = {{25, 90, 400, 2, 1}, {20, 60, 8, 3, 0}, {30, 40, 4, 4, 1}};
  uint64_t unpaired = 0;
  const auto out = pair_collectives(ops, works, &name_of, &names, &unpaired);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].start_ns, 10);
  EXPECT_EQ(out[0].end_ns, 90);
  EXPECT_EQ(out[0].bytes, 400);
  EXPECT_EQ(out[1].end_ns, 60);
  EXPECT_EQ(unpaired, 1u);
  EXPECT_EQ(collective_kind_of_op("c10d::_reduce_scatter_base_"), "all_reduce");  // gloo's emulation
  EXPECT_EQ(collective_kind_of_op("aten::mm"), "");
  EXPECT_EQ(collective_kind_of_work("c10d::allreduce_"), "");
  EXPECT_EQ(collective_kind_of_work("nccl:all_reduce"), "all_reduce");
}

TEST(RankFolders, AnotherJobsFolderAndAMissingRankAreRefused) {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / ("torchneck_ranks_" + std::to_string(::getpid()));
  fs::remove_all(base);
  for (int r = 0; r < 2; ++r) {
    fs::create_directories(base / ("rank-" + std::to_string(r)));
    torchneck::Run run;
    run.rank.rank = r;
    run.rank.world_size = 2;
    run.rank.job = r == 0 ? "a" : "b";
    save_run(run, (base / ("rank-" + std::to_string(r)) / "profile.spill").string());
  }
  auto load = [](const std::string& dir, std::vector<std::string>&) { return load_run(dir + "/profile.spill"); };
  try {
    load_rank_folders(base.string(), true, load);
    ADD_FAILURE() << "another job's folder was merged";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("from another run"), std::string::npos) << e.what();
  }
  const RankFolders lenient = load_rank_folders(base.string(), false, load);
  EXPECT_EQ(lenient.runs.size(), 1u);
  EXPECT_FALSE(lenient.notes.empty());
  fs::remove_all(base / "rank-1");
  try {
    load_rank_folders(base.string(), true, load);
    ADD_FAILURE() << "a missing rank was not said";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 of 2 has no folder"), std::string::npos) << e.what();
  }
  fs::remove_all(base);
}

}  // namespace
}  // namespace torchneck
