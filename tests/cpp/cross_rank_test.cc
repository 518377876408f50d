// Ranks side by side (analyze/cross_rank.h) on runs built by hand, where the
// truth is planted: which rank arrives late at each collective and by how
// much; the pairing of a rank's dispatcher ops with its backend's Works
// (model/collectives.h); and a job's folder read back (model/rank_folders.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "analyze/diagnosis.h"
#include "analyze/cross_rank.h"
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

// LATE_MS[r][i]: how late rank r arrives in step i; a step whose last
// arrival is past 45 ms is that much longer than 100 ms.
Job job_by_step(const std::vector<std::vector<int64_t>>& late_ms) {
  Job j;
  const size_t steps = late_ms[0].size();
  std::vector<int64_t> start(steps + 1, 0), latest(steps, 0);
  for (size_t i = 0; i < steps; ++i) {
    for (const std::vector<int64_t>& rank : late_ms) latest[i] = std::max(latest[i], rank[i]);
    start[i + 1] = start[i] + std::max<int64_t>(100, 40 + latest[i] + 5 + 10) * kMs;
  }
  for (size_t r = 0; r < late_ms.size(); ++r) {
    torchneck::Run run;
    run.rank.rank = static_cast<int64_t>(r);
    run.rank.host = "h";
    run.strings = {"aten::mm", "c10d::allreduce_"};
    run.threads.resize(1);
    StepAnalysis sa;
    for (size_t i = 0; i < steps; ++i) {
      const int64_t t0 = start[i];
      const int64_t arrive = t0 + (40 + late_ms[r][i]) * kMs;
      const int64_t done = t0 + (40 + latest[i] + 5) * kMs;
      OpEvent op{};
      op.start_ns = t0;
      op.end_ns = arrive;
      op.name_id = 0;
      run.timeline.push_back(op);
      OpEvent after{};  // the optimizer, after the all-reduce completed
      after.start_ns = done;
      after.end_ns = start[i + 1];
      run.timeline.push_back(after);
      run.collectives.push_back(CollectiveEvent{arrive, done, 4 << 20, 1, 0});
      Step s;
      s.start_ns = t0;
      s.end_ns = start[i + 1];
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

// 20 steps, each rank as late in every one.
Job job(const std::vector<int64_t>& late_ms) {
  std::vector<std::vector<int64_t>> by_step;
  for (int64_t l : late_ms) by_step.emplace_back(20, l);
  return job_by_step(by_step);
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

bool has(const std::vector<Finding>& fs, const std::string& id) {
  return std::any_of(fs.begin(), fs.end(), [&](const Finding& f) { return f.id == id; });
}

TEST(Ranks, WorkThatDiffersFromStepToStepIsLoadImbalance) {
  // GIVEN two ranks late by turns, 40 ms every step (batches of different
  // sizes): each waits 40 ms in every other step
  std::vector<std::vector<int64_t>> late(2, std::vector<int64_t>(20, 0));
  for (size_t i = 0; i < 20; ++i) late[i % 2][i] = 40;
  const RankAnalysis a = compare(job_by_step(late));
  // THEN every step waits 20 ms on average over the ranks, the median too
  EXPECT_NEAR(a.typical_wait_ns, 20.0 * kMs, 1);
  const std::vector<Finding> f = rank_findings(a);
  EXPECT_TRUE(has(f, "load_imbalance")) << f.size();
  EXPECT_FALSE(has(f, "straggler"));
}

TEST(Ranks, OneLongWaitOfEachRankInAShortWindowIsNoLoadImbalance) {
  // GIVEN the 6 steps of a short run's window (5 steady), each rank
  // descheduled once, 150 ms late in one step (on 2 noisy cores), on time
  // in the others
  std::vector<std::vector<int64_t>> late(2, std::vector<int64_t>(6, 0));
  late[0][2] = 150;
  late[1][4] = 150;
  const RankAnalysis a = compare(job_by_step(late));
  // THEN the mean wait is over 15 % of the mean step (150 ms a rank over 5
  // steps, 30 ms, of a 142 ms mean step: 21 %), the median step's is none
  double wait = 0, step = 0;
  for (const RankSummary& s : a.ranks) wait += s.wait_ns / 2, step += s.step_ns / 2;
  EXPECT_GT(wait, 0.15 * step);
  EXPECT_NEAR(a.typical_wait_ns, 0, 1);
  // AND neither load_imbalance nor a straggler is named
  const std::vector<Finding> f = rank_findings(a);
  EXPECT_FALSE(has(f, "load_imbalance"));
  EXPECT_FALSE(has(f, "straggler"));
}

// Plants RANK's main-thread clocks (Run::step_clocks): CPU_MS of CPU time
// and RUNQUEUE_MS of waiting for a core per 100 ms step, read at every
// EVERY-th step end (a long run's thinned series), cumulative.
void plant_clocks(Job& j, size_t rank, int64_t cpu_ms, int64_t runqueue_ms, int64_t every = 1) {
  Run& run = j.runs[rank];
  run.step_clocks.clear();
  for (int64_t i = 0; i <= 20; i += every)
    run.step_clocks.push_back(StepClock{i * 100 * kMs, 7 * kMs + i * cpu_ms * kMs, 3 * kMs + i * runqueue_ms * kMs, 0});
}

// Rank 1 arrives 30 ms late at every all-reduce; its main thread's clocks
// say why: more CPU time (it computes more), more waiting for a core (its
// host), or neither (it is off the CPU: blocked, or on a slower core). On
// a host whose every core is busy (rank 0 waits for a core as long as it
// computes), rank 1's extra work waits as long again: that is its
// computing, not its host.
TEST(Ranks, AStragglersMainThreadClocksTellComputingFromWaiting) {
  struct Case {
    int64_t others_cpu_ms, others_runqueue_ms, cpu_ms, runqueue_ms;
    const char* cause;
  };
  for (const Case& c : {Case{60, 2, 88, 2, "compute"}, Case{60, 2, 60, 27, "host"}, Case{60, 2, 60, 2, "blocked"},
                        Case{40, 40, 55, 55, "compute"}, Case{40, 40, 40, 68, "host"}}) {
    Job j = job({0, 30});
    plant_clocks(j, 0, c.others_cpu_ms, c.others_runqueue_ms);
    plant_clocks(j, 1, c.cpu_ms, c.runqueue_ms, 2);  // every other step end: interpolated
    const RankAnalysis a = compare(j);
    EXPECT_NEAR(a.ranks[0].cpu_ns, static_cast<double>(c.others_cpu_ms * kMs), 1);
    EXPECT_NEAR(a.ranks[1].cpu_ns, static_cast<double>(c.cpu_ms * kMs), 1);
    EXPECT_NEAR(a.ranks[1].runqueue_ns, static_cast<double>(c.runqueue_ms * kMs), 1);
    const std::vector<Finding> f = rank_findings(a);
    ASSERT_EQ(f.size(), 1u) << c.cause;
    EXPECT_EQ(f[0].cause, c.cause);
    EXPECT_EQ(*f[0].rank, 1);
  }
}

TEST(Ranks, WithoutEveryRanksClocksOrWithDeviceWorkTheCauseIsCompute) {
  Job j = job({0, 30});
  plant_clocks(j, 1, 60, 2);  // rank 0's unknown: no comparison of CPU times
  RankAnalysis a = compare(j);
  EXPECT_LT(a.ranks[0].cpu_ns, 0);
  EXPECT_EQ(rank_findings(a)[0].cause, "compute");
  plant_clocks(j, 0, 60, 2);
  j.runs[1].gpu_window.state = GpuWindowState::kRecorded;  // its compute is partly its GPU's
  a = compare(j);
  EXPECT_TRUE(a.ranks[1].device_work);
  EXPECT_EQ(rank_findings(a)[0].cause, "compute");
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

TEST(Ranks, ARankKilledWithNoReportIsNamedFromItsLastSpill) {
  Job j = job({0, 0});
  j.runs[1].run.ending = run_ending_from_string("still running");
  j.runs[1].run.exit_code = 0;  // what a spill holds: the run had not ended
  j.runs[1].run.wall_s = 1.0;
  j.runs[0].run.ending = run_ending_from_string("SIGTERM");
  j.runs[0].run.wall_s = 2.0;
  const RankAnalysis a = compare(j);
  EXPECT_EQ(a.first_failure, 1);
  EXPECT_NE(a.failure.find("rank 1 failed first: killed with no report"), std::string::npos) << a.failure;
  EXPECT_EQ(a.failure.find("exit status"), std::string::npos) << a.failure;
  EXPECT_NE(a.failure.find("rank 0 ended 1.00 s after that spill (SIGTERM)"), std::string::npos) << a.failure;
}

// Two ranks of 20 steps of 100 ms whose all-reduce is pending while they
// compute (DDP's, under backward): rank 0 enqueues it at 10 ms and computes
// until 40 ms; rank 1 computes until 70 ms and enqueues it then; it
// completes at 75 ms, then each runs its optimizer to 100 ms. Rank 0's
// wait is 40-70 ms. Detail windows: the operators are recorded in the
// steps for which DETAILED(rank, step) holds only.
Job async_job(bool (*detailed)(size_t rank, int64_t step)) {
  Job j;
  for (size_t r = 0; r < 2; ++r) {
    Run run;
    run.rank.rank = static_cast<int64_t>(r);
    run.rank.host = "h";
    run.strings = {"aten::mm", "c10d::allreduce_"};
    run.threads.resize(1);
    run.detail_mode = "window";
    StepAnalysis sa;
    for (int64_t i = 0; i < 20; ++i) {
      const int64_t t0 = i * 100 * kMs;
      const int64_t enqueue = t0 + (r == 0 ? 10 : 70) * kMs, computed = t0 + (r == 0 ? 40 : 70) * kMs;
      const int64_t done = t0 + 75 * kMs;
      Step s;
      s.start_ns = t0;
      s.end_ns = t0 + 100 * kMs;
      s.steady = i > 0;
      s.detailed = detailed(r, i);
      s.breakdown.ns[static_cast<int>(Phase::kBackward)] = 100 * kMs;
      if (s.detailed) {
        OpEvent op{};
        op.start_ns = t0;
        op.end_ns = computed;
        run.timeline.push_back(op);
        OpEvent after{};
        after.start_ns = done;
        after.end_ns = s.end_ns;
        run.timeline.push_back(after);
      }
      run.collectives.push_back(CollectiveEvent{enqueue, done, 4 << 20, 1, 0});
      sa.steps.push_back(s);
    }
    run.run.ending = run_ending_from_string("finished");
    j.runs.push_back(std::move(run));
    j.steps.push_back(std::move(sa));
  }
  return j;
}

TEST(Ranks, UnderDetailWindowsTheWaitsAreMeasuredWhereEveryRanksOperatorsAreKnown) {
  // GIVEN both ranks detailed in steps 0-6 and 12-15 (the fixed schedule:
  // the same steps on both), their operators unknown in the others
  const Job j = async_job([](size_t, int64_t i) { return i < 7 || (i >= 12 && i < 16); });
  // WHEN the ranks are compared
  const RankAnalysis a = compare(j);
  // THEN every steady step is compared, and rank 0's wait is its 30 ms,
  // not the 60 ms its all-reduce was pending: the time it computed meanwhile
  // is known in the detailed steps, where the waits are measured
  ASSERT_EQ(a.ranks.size(), 2u);
  EXPECT_EQ(a.steps, 19u);
  EXPECT_NEAR(a.ranks[0].wait_ns, 30.0 * kMs, 1);
  EXPECT_NEAR(a.ranks[1].wait_ns, 0, 1);
  EXPECT_NEAR(a.ranks[0].transfer_ns, 5.0 * kMs, 1);
  EXPECT_NEAR(a.ranks[1].compute_ns - a.ranks[0].compute_ns, 30.0 * kMs, 1);
  bool said = false;
  for (const std::string& n : a.notes) said = said || n.find("over the 10 steps every rank detailed") != std::string::npos;
  EXPECT_TRUE(said);
  // AND the straggler is rank 1, for its compute
  const std::vector<Finding> f = rank_findings(a);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "straggler");
  EXPECT_EQ(*f[0].rank, 1);
}

// Cumulative main-thread clocks at every 100 ms step end of RANK: CPU_MS(i)
// of CPU time in step i, 2 ms of waiting for a core.
void plant_clocks_by_step(Job& j, size_t rank, int64_t (*cpu_ms)(int64_t step)) {
  Run& run = j.runs[rank];
  run.step_clocks.clear();
  int64_t cpu = 7 * kMs;
  for (int64_t i = 0; i <= 20; ++i) {
    run.step_clocks.push_back(StepClock{i * 100 * kMs, cpu, 3 * kMs + i * 2 * kMs, 0});
    if (i < 20) cpu += cpu_ms(i) * kMs;
  }
}

TEST(Ranks, AStragglerOfTheDetailedStepsOnlyIsNoStragglerOfTheRun) {
  // GIVEN rank 1 later by 30 ms at every all-reduce of the steps both ranks
  // detailed (0-6 and 12-15: the waits are measured there), its main
  // thread computing 30 ms more per step there
  const auto detailed = [](size_t, int64_t i) { return i < 7 || (i >= 12 && i < 16); };
  Job j = async_job(detailed);
  plant_clocks_by_step(j, 0, [](int64_t) -> int64_t { return 60; });
  // WHEN it computes as much more in every step, THEN it is the run's
  // straggler, for its compute, by the whole 30 ms
  plant_clocks_by_step(j, 1, [](int64_t) -> int64_t { return 90; });
  std::vector<Finding> f = rank_findings(compare(j));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, "compute");
  ASSERT_EQ(f[0].numbers[0].first, "excess_ms");
  EXPECT_NEAR(f[0].numbers[0].second, 30.0, 0.5);
  // WHEN it computes more in the detailed steps only (the first window:
  // warm-up's tail), THEN over the run it is 30 ms x 10 of 19 steps, under
  // a fifth of the step: no straggler, and the cause is never "blocked" for
  // CPU time the detailed steps did show
  plant_clocks_by_step(j, 1, [](int64_t i) -> int64_t { return i < 7 || (i >= 12 && i < 16) ? 90 : 60; });
  f = rank_findings(compare(j));
  EXPECT_TRUE(f.empty()) << f[0].title;
  // WHEN the other rank computed 10 ms more in the detailed steps only, so
  // that they show 20 ms of the 30 the other 9 steps do, THEN the excess is
  // the detailed steps' 30 ms times the run's CPU excess over theirs
  plant_clocks_by_step(j, 1, [](int64_t) -> int64_t { return 90; });
  plant_clocks_by_step(j, 0, [](int64_t i) -> int64_t { return i < 7 || (i >= 12 && i < 16) ? 70 : 60; });
  f = rank_findings(compare(j));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, "compute");
  EXPECT_NEAR(f[0].numbers[0].second, 30.0 * (9 * 30.0 + 10 * 20.0) / 19 / 20.0, 0.5);
}

TEST(Ranks, WindowsOnDifferentStepsOnEachRankAreSaidToOverstateTheWaits) {
  // GIVEN windows that never cover the same step on both ranks (each
  // rank's own adaptive policy)
  const Job j = async_job([](size_t r, int64_t i) { return (i % 2 == 0) == (r == 0); });
  const RankAnalysis a = compare(j);
  // THEN the waits are over every step, and said to include the computing
  // they could not see
  ASSERT_EQ(a.ranks.size(), 2u);
  EXPECT_GT(a.ranks[0].wait_ns, 30.0 * kMs + 1);
  bool said = false;
  for (const std::string& n : a.notes) said = said || n.find("no step was detailed on every rank") != std::string::npos;
  EXPECT_TRUE(said);
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
  EXPECT_EQ(collective_kind_of_op("c10d::_reduce_scatter_base_"), "reduce_scatter");
  EXPECT_EQ(collective_kind_of_op("aten::mm"), "");
  EXPECT_EQ(collective_kind_of_work("c10d::allreduce_"), "");
  EXPECT_EQ(collective_kind_of_work("nccl:all_reduce"), "all_reduce");
}

// FSDP's collectives, as torch 2.6 names them (docs/distributed.md, FSDP):
// FULL_SHARD on gloo (CPU) all-gathers with all_gather (c10d::allgather_,
// gloo:all_gather) and reduce-scatters with reduce_scatter_tensor
// (c10d::_reduce_scatter_base_), whose Work gloo names gloo:all_reduce;
// all_gather_into_tensor is c10d::_allgather_base_, its Work gloo:all_gather
// on gloo and nccl:_all_gather_base on NCCL.
TEST(Collectives, FsdpsAllGatherAndReduceScatterAreNamedAndPaired) {
  EXPECT_EQ(collective_kind("c10d::allgather_"), "all_gather");
  EXPECT_EQ(collective_kind("c10d::_allgather_base_"), "all_gather");
  EXPECT_EQ(collective_kind("c10d::allgather_into_tensor_coalesced_"), "all_gather");
  EXPECT_EQ(collective_kind("c10d::reduce_scatter_tensor_coalesced_"), "reduce_scatter");
  EXPECT_EQ(collective_kind("c10d::alltoall_base_"), "all_to_all");
  EXPECT_EQ(collective_kind("gloo:all_to_all"), "all_to_all");
  EXPECT_EQ(collective_kind("nccl:_all_gather_base"), "all_gather");
  EXPECT_EQ(collective_kind("nccl:_reduce_scatter_base"), "reduce_scatter");
  EXPECT_EQ(collective_kind("nccl:reduce_scatter_tensor_coalesced"), "reduce_scatter");
  EXPECT_EQ(collective_kind("gloo:some_new_title"), "some_new_title");
  EXPECT_EQ(collective_kind("aten::mm"), "");

  // gloo: gather (forward), reduce-scatter run as an all-reduce (backward),
  // a DDP-style all-reduce, and all_gather_into_tensor.
  const std::vector<std::string> names = {"c10d::allgather_", "c10d::_reduce_scatter_base_", "c10d::allreduce_",
                                          "c10d::_allgather_base_", "gloo:all_gather", "gloo:all_reduce"};
  std::vector<CollectivePiece> ops = {{10, 11, -1, 0, 0}, {20, 21, -1, 1, 0}, {30, 31, -1, 2, 0},
                                      {40, 41, -1, 3, 0}};
  std::vector<CollectivePiece> works = {{12, 15, 100, 4, 1}, {22, 27, 200, 5, 1}, {32, 38, 300, 5, 1},
                                        {42, 49, 400, 4, 1}};
  uint64_t unpaired = 0;
  auto out = pair_collectives(ops, works, &name_of, &names, &unpaired);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].end_ns, 15);
  EXPECT_EQ(out[1].end_ns, 27);  // the reduce-scatter: gloo's all-reduce
  EXPECT_EQ(out[1].bytes, 200);
  EXPECT_EQ(out[2].end_ns, 38);
  EXPECT_EQ(out[3].end_ns, 49);
  EXPECT_EQ(unpaired, 0u);

  // gloo's coalesced reduce-scatter of 3 tensors: 3 all-reduce Works for
  // one op; the next all-reduce takes the Work that started after it.
  const std::vector<std::string> names2 = {"c10d::reduce_scatter_tensor_coalesced_", "c10d::allreduce_",
                                           "gloo:all_reduce"};
  ops = {{10, 20, -1, 0, 0}, {100, 101, -1, 1, 0}};
  works = {{12, 30, 8, 2, 1}, {31, 40, 8, 2, 1}, {41, 50, 8, 2, 1}, {102, 130, 16, 2, 1}};
  out = pair_collectives(ops, works, &name_of, &names2, &unpaired);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].end_ns, 30);
  EXPECT_EQ(out[1].end_ns, 130);
  EXPECT_EQ(out[1].bytes, 16);
  EXPECT_EQ(unpaired, 2u);

  // NCCL names its reduce-scatter's Work: no all-reduce stands in for it.
  const std::vector<std::string> names3 = {"c10d::_reduce_scatter_base_", "c10d::allreduce_",
                                           "nccl:_reduce_scatter_base", "nccl:all_reduce"};
  ops = {{10, 11, -1, 0, 0}, {20, 21, -1, 1, 0}};
  works = {{12, 60, 8, 2, 1}, {22, 40, 8, 3, 1}};
  out = pair_collectives(ops, works, &name_of, &names3, &unpaired);
  EXPECT_EQ(out[0].end_ns, 60);
  EXPECT_EQ(out[1].end_ns, 40);
  EXPECT_EQ(unpaired, 0u);
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
