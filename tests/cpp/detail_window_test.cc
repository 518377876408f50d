// Detail windows (core/detail_window.h): the policy on planted step times,
// and the steps analysis of a run detailed only in windows, against the
// same run built with every step detailed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "analyze/detail_cost.h"
#include "analyze/steps.h"
#include "core/detail_window.h"
#include "run_builder.h"

namespace torchneck {
namespace {

using test_support::RunBuilder;

constexpr int64_t kMs = 1'000'000;

// Feeds `n` boundaries to the policy, each step lasting `detailed` ns while
// detail is on and `light` ns while it is off; returns which steps were
// detailed (index: the step that ends at that boundary). At the end of step
// NO_ROOM_AT, the timeline's room for detail runs out (stop_opening).
std::vector<bool> drive(DetailPolicy& p, int n, int64_t detailed, int64_t light, int no_room_at = -1) {
  std::vector<bool> on;
  int64_t t = 1;
  bool now = true;  // detail is on from the start
  p.on_boundary(t);  // the boundary that ends set-up
  for (int i = 0; i < n; ++i) {
    t += now ? detailed : light;
    on.push_back(now);
    if (i == no_room_at) p.stop_opening();
    now = p.on_boundary(t);
  }
  return on;
}

size_t count(const std::vector<bool>& v) {
  size_t n = 0;
  for (bool b : v) n += b ? 1 : 0;
  return n;
}

TEST(DetailPolicy, CostlyDetailIsOnForWindowsSizedToTheBudget) {
  // GIVEN detail that makes a step 50 % slower (1.5 ms against 1 ms)
  DetailPolicyOptions o;  // warm-up 2, windows of 5, probe 3, budget 2 %
  DetailPolicy p(o);
  // WHEN 2000 steps run
  const std::vector<bool> on = drive(p, 2000, 3 * kMs / 2, kMs);
  // THEN the cost is measured as 0.5 and windows of 1 + 5 steps recur
  // every 6 * 0.5 / 0.02 = 150 steps: the detailed steps cost ~2 % of the run
  EXPECT_NEAR(p.measured_cost(), 0.5, 1e-9);
  EXPECT_EQ(p.period(), 150);
  EXPECT_FALSE(p.continuous());
  EXPECT_TRUE(on[0] && on[1] && on[5]);  // warm-up and the first window
  EXPECT_FALSE(on[8]);
  const double detailed = static_cast<double>(count(on));
  const double extra = detailed * 0.5 / (2000 + detailed * 0.5);
  EXPECT_GT(extra, 0.01);
  EXPECT_LT(extra, 0.03);
  // and past the first window, the reopened windows cost the budget, not
  // more: 6 steps of +50 % every 150 steps
  const std::vector<bool> later(on.begin() + 150, on.begin() + 1950);
  const double later_extra = static_cast<double>(count(later)) * 0.5;
  EXPECT_LE(later_extra / (1800 + later_extra), 0.02);
}

TEST(DetailPolicy, CheapDetailStaysOnButForRarerAndRarerProbes) {
  // GIVEN detail that costs 1 % of a step, under the 2 % budget
  DetailPolicy p;
  const std::vector<bool> on = drive(p, 300, 101 * kMs / 100, kMs);
  // THEN detail stays on, but for probes of 3 light steps after the first
  // window (steps 6-8), after 1 + 20 detailed steps (30-32), after 1 + 40
  // (74-76) and after 1 + 80 (158-160)
  EXPECT_TRUE(p.continuous());
  EXPECT_EQ(count(on), 300u - 4 * 3u);
  for (int k : {6, 8, 30, 32, 74, 76, 158, 160}) EXPECT_FALSE(on[k]) << k;
  for (int k : {5, 9, 29, 33, 73, 77, 157, 161}) EXPECT_TRUE(on[k]) << k;
  EXPECT_TRUE(on.back());
}

TEST(DetailPolicy, OnNoisyStepsTheCostIsJudgedByItsUpperBound) {
  // GIVEN detail that costs 5 % of a step, on steps that vary by a uniform
  // +-35 % (sd ~20 %) from one to the next, as input_bound_python's do
  // under the sampler; a probe's 5 and 3 steps then measure anything from
  // about -20 % to +30 %
  DetailPolicy p;
  uint64_t seed = 12345;
  auto noisy = [&](int64_t base) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(seed >> 11) / 9007199254740992.0;  // [0, 1)
    return static_cast<int64_t>(static_cast<double>(base) * (0.65 + 0.7 * u));
  };
  std::vector<bool> on;
  int64_t t = 1;
  bool now = true;
  p.on_boundary(t);
  for (int i = 0; i < 2000; ++i) {
    t += noisy(now ? 105 * kMs / 100 : kMs);
    on.push_back(now);
    now = p.on_boundary(t);
  }
  // THEN the noise is measured (~20 %), the detail never stays on, and it
  // costs the run about the budget or less, whatever each probe measured
  EXPECT_NEAR(p.cost_error() / 1.25 / std::sqrt(1.0 / 5 + 1.0 / 3), 0.2, 0.06);
  EXPECT_FALSE(p.continuous());
  const double detailed = static_cast<double>(count(on));
  const double extra = detailed * 0.05 / (2000 + detailed * 0.05);
  EXPECT_LT(extra, 0.02) << detailed;
  EXPECT_GE(detailed, 5 + 2 + 5.0);  // set-up's warm-up, the first window, and more
}

TEST(DetailPolicy, ACostlyDetailMeasuredCheapOnceIsWindowedAtTheRecheck) {
  // GIVEN a first probe whose light steps ran as slow as the detailed ones
  // (a noisy machine), then detail that costs 50 %
  DetailPolicy p;
  std::vector<bool> on;
  int64_t t = 1;
  bool now = true;
  p.on_boundary(t);
  for (int i = 0; i < 400; ++i) {
    t += now ? 3 * kMs / 2 : (i < 10 ? 3 * kMs / 2 : kMs);
    on.push_back(now);
    now = p.on_boundary(t);
  }
  // THEN after the recheck (steps 30-32) it is windowed as the cost says:
  // the first window, the recheck's 21 steps, then 6 steps every 150
  EXPECT_NEAR(p.measured_cost(), 0.5, 1e-9);
  EXPECT_FALSE(p.continuous());
  EXPECT_EQ(p.period(), 150);
  EXPECT_FALSE(on[40] || on[100]);
  EXPECT_LE(count(on), 6u + 21u + 3 * 6u);
}

TEST(DetailPolicy, AStepTimeThatGrowsIsNotTakenForTheDetailsCost) {
  // GIVEN steps 2 % longer each step (state that grows), detail that costs
  // 15 % of a step, and a first probe whose light steps ran as slow as the
  // detailed ones (a noisy machine): detail stays on until the recheck
  DetailPolicy p;
  int64_t t = 1;
  bool now = true;
  p.on_boundary(t);
  for (int i = 0; i < 40; ++i) {
    const double light = 1e6 * (1.0 + 0.02 * i);
    t += static_cast<int64_t>(now || i < 10 ? 1.15 * light : light);
    now = p.on_boundary(t);
  }
  // THEN at the recheck (steps 31-33) it is windowed: its 21 steps' median
  // lies 11 steps of growth before the light steps (22 %: more than the
  // cost), their last 5 steps' 3 steps before (6 %)
  EXPECT_FALSE(p.continuous());
  EXPECT_GT(p.measured_cost(), 0.05);
  EXPECT_LT(p.measured_cost(), 0.15);
}

TEST(DetailPolicy, WindowsAreNeverCloserThanTheProbeNeeds) {
  // GIVEN detail just over the budget (2.5 %): the period from the formula
  // (6 * 0.025 / 0.02 = 7.5 steps) is shorter than a window and its probe
  DetailPolicy p;
  drive(p, 400, 1025 * kMs / 1000, kMs);
  // THEN the period is the window (with its unmeasured first step) plus
  // the light steps that measure it
  EXPECT_EQ(p.period(), 1 + 5 + 3);
}

TEST(DetailPolicy, RanksOnTheFixedScheduleDetailTheSameStepsWhateverTheirCost) {
  // GIVEN two ranks on the fixed schedule, one whose detail costs 1 % of a
  // step (the adaptive policy would keep it on), one whose detail costs 50 %
  DetailPolicyOptions o;
  o.lockstep_period = 100;
  DetailPolicy cheap(o), costly(o);
  // WHEN 450 steps run
  const std::vector<bool> a = drive(cheap, 450, 101 * kMs / 100, kMs);
  const std::vector<bool> b = drive(costly, 450, 3 * kMs / 2, kMs);
  // THEN both detail the same steps: the first window (set-up's boundary,
  // then steps 0-5), then steps 99-104, 199-204, ... (from every 100th
  // boundary, 1 + 5 steps)
  EXPECT_EQ(a, b);
  for (int k = 0; k < 450; ++k) {
    const bool expected = k <= 5 || ((k + 1) % 100) < 6;
    EXPECT_EQ(a[k], expected) << k;
  }
  EXPECT_EQ(count(a), 6u + 4 * 6u);
  EXPECT_FALSE(cheap.continuous());
  // AND each measured its own cost, which neither followed
  EXPECT_NEAR(costly.measured_cost(), 0.5, 1e-9);
  EXPECT_NEAR(cheap.measured_cost(), 0.01, 1e-9);
  EXPECT_EQ(costly.period(), 100);
}

TEST(DetailPolicy, AProcessThatLearnsItIsARankLaterJoinsTheSchedule) {
  // GIVEN a process on the adaptive policy that joins a process group
  // after 60 steps (its detail cheap: on since), and a rank on the fixed
  // schedule from the start
  DetailPolicyOptions o;
  o.lockstep_period = 100;
  DetailPolicy late, rank(o);
  const std::vector<bool> before = drive(late, 60, 101 * kMs / 100, kMs);
  const std::vector<bool> rank_before = drive(rank, 60, 101 * kMs / 100, kMs);
  EXPECT_NE(before, rank_before);
  late.set_lockstep(100);
  // WHEN both go on for 250 steps
  std::vector<bool> x, y;
  int64_t t = 1'000 * kMs;
  for (int i = 0; i < 250; ++i) {
    t += kMs;
    x.push_back(late.on_boundary(t));
    y.push_back(rank.on_boundary(t));
  }
  // THEN from the switch on they detail the same steps, the schedule's
  EXPECT_EQ(x, y);
  EXPECT_EQ(count(x), 3 * 6u);  // from boundaries 100, 200 and 300
  EXPECT_FALSE(late.continuous());
}

TEST(DetailPolicy, DetailHeldOnStaysOnAndAMeasuredWindowFollowsItsRelease) {
  // GIVEN costly detail (+50 %) held on (the GPU window, to come then
  // open) for the first 15 steps
  DetailPolicy p;
  std::vector<bool> on;
  int64_t t = 1;
  bool now = true;
  p.on_boundary(t, true);
  for (int i = 0; i < 400; ++i) {
    t += now ? 3 * kMs / 2 : kMs;
    on.push_back(now);
    now = p.on_boundary(t, i < 14);
  }
  // THEN steps 0-14 are detailed, then the window that follows (1 + 5
  // steps) is measured against the light probe after it, and windows
  // recur as that cost says (every 150 steps)
  for (int k = 0; k < 21; ++k) EXPECT_TRUE(on[k]) << k;
  EXPECT_FALSE(on[21]);
  EXPECT_NEAR(p.measured_cost(), 0.5, 1e-9);
  EXPECT_EQ(p.period(), 150);
  EXPECT_FALSE(on[100]);
  EXPECT_FALSE(on[15 + 125]);
  EXPECT_TRUE(on[15 + 150]);
}

TEST(DetailPolicy, TheFixedScheduleIsNotHeld) {
  DetailPolicyOptions o;
  o.lockstep_period = 100;
  DetailPolicy p(o);
  int64_t t = 1;
  std::vector<bool> on;
  for (int i = 0; i < 50; ++i) on.push_back(p.on_boundary(t += kMs, true));
  EXPECT_FALSE(on[10]);  // every rank keeps the schedule
}

TEST(DetailPolicy, WithNoRoomLeftTheOpenWindowClosesAndNoneOpensAgain) {
  // GIVEN costly detail (+50 %, a window every 150 steps), whose timeline
  // runs out of room for detail in the second window (step 152)
  DetailPolicy p;
  const std::vector<bool> on = drive(p, 1000, 3 * kMs / 2, kMs, 152);
  // THEN the window closes at that boundary, not at its end (step 155),
  // and no window opens again: the steps after it are light
  EXPECT_TRUE(p.stopped_opening());
  EXPECT_EQ(p.no_room_step(), 154);  // the 154th boundary: drive()'s first ends set-up, then steps 0..152
  EXPECT_TRUE(on[150] && on[152]);
  for (int k = 153; k < 1000; ++k) EXPECT_FALSE(on[k]) << k;
  // AND the windows before it were the usual ones
  EXPECT_TRUE(on[5]);
  EXPECT_FALSE(on[8]);
}

TEST(DetailPolicy, CheapDetailOnThroughoutStopsWhenTheRoomRunsOut) {
  // GIVEN cheap detail (1 %), on for all but its probes
  DetailPolicy p;
  const std::vector<bool> on = drive(p, 300, 101 * kMs / 100, kMs, 100);
  // THEN it is off from the next step on, the probes included
  EXPECT_TRUE(on[100]);
  for (int k = 101; k < 300; ++k) EXPECT_FALSE(on[k]) << k;
}

TEST(DetailPolicy, WithNoRoomLeftAHeldStretchStillHoldsAndTheScheduleIsKept) {
  // GIVEN no room from the start: the GPU window still holds detail on
  DetailPolicy held;
  held.stop_opening();
  int64_t t = 1;
  EXPECT_TRUE(held.on_boundary(t += kMs, true));
  EXPECT_TRUE(held.on_boundary(t += kMs, true));
  // and no measured window follows its release
  EXPECT_FALSE(held.on_boundary(t += kMs));
  EXPECT_FALSE(held.on_boundary(t += kMs));
  // AND a rank keeps the fixed schedule, which every rank must share
  DetailPolicyOptions o;
  o.lockstep_period = 100;
  DetailPolicy rank(o), reference(o);
  rank.stop_opening();
  const std::vector<bool> a = drive(rank, 450, 3 * kMs / 2, kMs);
  const std::vector<bool> b = drive(reference, 450, 3 * kMs / 2, kMs);
  EXPECT_EQ(a, b);
}

// Step k of a run: a 1 ms fetch, module forward 3 ms with its operator,
// backward node 4 ms, SGD.step 2 ms (10 ms). Without detail only the
// fetch and SGD.step (user scopes) are in the run.
int64_t step(RunBuilder& rb, int64_t t, int64_t seq, bool detail) {
  rb.event("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", OpKind::kUserScope, t, t + kMs);
  t += kMs;
  if (detail) {
    rb.module(0, t, t + 3 * kMs);
    rb.event("aten::addmm", OpKind::kOperator, t + kMs, t + 3 * kMs, seq);
    rb.event("AddmmBackward0", OpKind::kBackward, t + 3 * kMs, t + 7 * kMs, seq);
  }
  rb.event("Optimizer.step#SGD.step", OpKind::kUserScope, t + 7 * kMs, t + 9 * kMs);
  return t + 9 * kMs;
}

RunBuilder windowed_run(int steps, int window_from, int window_to) {
  RunBuilder rb;
  rb.run.modules = {ModuleInfo{"Net", "Net", 10, -1}};
  rb.run.env.optimizers = {OptimizerFacts{"SGD", 2, false}};
  rb.run.detail_mode = "window";
  int64_t t = 0, span_start = 0;
  for (int k = 0; k < steps; ++k) {
    const bool detail = k < 3 || (k >= window_from && k < window_to);
    if (k == window_from) span_start = t;
    t = step(rb, t, k, detail);
    if (k == 2) rb.run.detail_spans.emplace_back(0, t);
    if (k == window_to - 1) rb.run.detail_spans.emplace_back(span_start, t);
  }
  rb.finish();
  return rb;
}

TEST(DetailWindows, UndetailedStepsGetTheDetailedStepsBreakdown) {
  // GIVEN 40 steps of which 0-2 and 20-24 were detailed
  RunBuilder rb = windowed_run(40, 20, 25);
  // WHEN the steps are analysed
  const StepAnalysis a = analyze_steps(rb.run);
  // THEN every step is counted and timed; 32 had their breakdown estimated
  ASSERT_EQ(a.steps.size(), 40u);
  EXPECT_EQ(a.estimated_steps, 32u);
  EXPECT_EQ(a.detail_mode, "window");
  EXPECT_FALSE(a.steps[10].detailed);
  EXPECT_TRUE(a.steps[21].detailed);
  // AND the run's breakdown is the planted one: data 1, forward 3,
  // backward 4, optimizer 2 (of 10 ms), as if every step were detailed
  EXPECT_EQ(a.step_ns, 10 * kMs);
  EXPECT_NEAR(static_cast<double>(a.breakdown[Phase::kData]), 1.0 * kMs, 1e3);
  EXPECT_NEAR(static_cast<double>(a.breakdown[Phase::kForward]), 3.0 * kMs, 1e3);
  EXPECT_NEAR(static_cast<double>(a.breakdown[Phase::kBackward]), 4.0 * kMs, 1e3);
  EXPECT_NEAR(static_cast<double>(a.breakdown[Phase::kOptimizer]), 2.0 * kMs, 1e3);
  // AND an undetailed step's own breakdown sums to its duration
  EXPECT_EQ(a.steps[30].breakdown.total(), a.steps[30].duration());
  // AND operators per step are over the detailed steps only
  EXPECT_NEAR(a.ops_per_step, 1.0, 1e-9);
}

// Steps 10 ms long plus `growth_ms` more each step (state that grows), and
// 25 ms more every `stall_every` steps; detailed in [0, 3) and in the given
// windows, each window's steps `cost` slower.
struct Window {
  int from, to;
  double cost;
};
RunBuilder drifting_run(int steps, const std::vector<Window>& windows, double growth_ms = 0.1, int stall_every = 0) {
  RunBuilder rb;
  rb.run.modules = {ModuleInfo{"Net", "Net", 10, -1}};
  rb.run.env.optimizers = {OptimizerFacts{"SGD", 2, false}};
  rb.run.detail_mode = "window";
  int64_t t = 0;
  std::vector<Window> all = windows;
  all.insert(all.begin(), Window{0, 3, 0.01});
  for (int k = 0; k < steps; ++k) {
    double cost = -1;
    for (const Window& w : all)
      if (k >= w.from && k < w.to) cost = w.cost;
    const bool detail = cost >= 0;
    const int64_t start = t;
    // a stall of 25 ms every `stall_every` steps (a checkpoint)
    const double stall = stall_every > 0 && k > 0 && k % stall_every == 0 ? 25.0 : 0.0;
    const double ms = (10.0 + growth_ms * k + stall) * (detail ? 1.0 + cost : 1.0);
    t += static_cast<int64_t>((ms - 10.0) * kMs);  // the extra time: "other", before the fetch
    t = step(rb, t, k, detail);
    if (!detail) continue;
    if (rb.run.detail_spans.empty() || rb.run.detail_spans.back().second != start)
      rb.run.detail_spans.emplace_back(start, t);  // a window opens
    else
      rb.run.detail_spans.back().second = t;
  }
  rb.finish();
  return rb;
}

TEST(DetailWindows, OnlyTheWindowsThatCostTimeAreLeftOutOfTheStepTimes) {
  // GIVEN 60 steps that grow 0.1 ms a step, a detail window over 10-30
  // whose steps are 30 % slower, and one over 40-45 costing 1 %
  RunBuilder rb = drifting_run(60, {{10, 31, 0.30}, {40, 46, 0.01}});
  // WHEN the steps are analysed
  const StepAnalysis a = analyze_steps(rb.run);
  ASSERT_EQ(a.steps.size(), 60u);
  // THEN the costly window's steps are out of the step times, the cheap
  // window's (and the warm-up window's, after step 0) are in
  for (int k = 10; k <= 30; ++k) EXPECT_TRUE(a.steps[k].detail_excluded) << k;
  for (int k : {1, 2, 40, 43, 45}) {
    EXPECT_TRUE(a.steps[k].steady) << k;
    EXPECT_FALSE(a.steps[k].detail_excluded) << k;
  }
  EXPECT_EQ(a.detail_excluded, 21u);
  // AND the steps' median is the undisturbed steps' (59 - 21 of them)
  EXPECT_EQ(a.steady_count, 38u);
}

TEST(DetailWindows, StepsAfterALeftOutWindowAreNotSlowAgainstTheRunsStart) {
  // GIVEN steps that grow 0.8 ms a step (10.8 ms at step 1, 58 ms at 60)
  // and a costly window over 10-30
  RunBuilder rb = drifting_run(61, {{10, 31, 0.30}}, 0.8);
  // WHEN the steps are analysed
  const StepAnalysis a = analyze_steps(rb.run);
  // THEN the window is left out, and the steps after it are typical: their
  // level is their own neighbours', not steps 1-9's across the gap
  EXPECT_EQ(a.detail_excluded, 21u);
  EXPECT_TRUE(a.slow.empty()) << a.slow.size() << " slow groups, the first of " << a.slow[0].steps.size();
}

TEST(DetailWindows, ACheapDetailOnForMostStepsStaysInTheStepTimes) {
  // GIVEN detail on but for three light steps after every 20 (found cheap)
  RunBuilder rb = drifting_run(60, {{3, 23, 0.01}, {26, 46, 0.015}, {49, 60, 0.0}});
  // WHEN the steps are analysed, THEN no step is left out
  const StepAnalysis a = analyze_steps(rb.run);
  EXPECT_EQ(a.detail_excluded, 0u);
  EXPECT_EQ(a.steady_count, 59u);
}

TEST(DetailWindows, InARunThatGrowsTheWindowsAreMeasuredAgainstTheTrend) {
  // GIVEN steps that grow 2 % a step and detail on but for the probes
  // (7-9, 31-33): the last window has undetailed steps on one side only,
  // where the growth alone puts its steps 6 % above the probe's
  for (const double cost : {0.01, 0.25}) {
    RunBuilder rb = drifting_run(60, {{3, 7, cost}, {10, 31, cost}, {34, 60, cost}}, 0.2);
    // WHEN the steps are analysed
    const StepAnalysis a = analyze_steps(rb.run);
    // THEN a cheap detail stays in the step times, a costly one is left out
    EXPECT_EQ(a.detail_excluded, cost < kCostlyDetailShare ? 0u : 6u + 21u + 26u) << cost;
  }
}

TEST(DetailWindows, APeriodicStallIsFoundThroughTheWindowsLeftOut) {
  // GIVEN 30 steps with a 25 ms stall every 5, and costly windows over 3-6
  // and 20-25 (with the warm-up's 0-2), which hold the stalls at 5, 20, 25
  RunBuilder rb = drifting_run(30, {{3, 7, 0.30}, {20, 26, 0.30}}, 0.0, 5);
  // WHEN the steps are analysed
  const StepAnalysis a = analyze_steps(rb.run);
  ASSERT_GT(a.detail_excluded, 0u);
  EXPECT_TRUE(a.steps[20].detail_excluded);
  // THEN the stalls are one periodic group, every 5 steps, windows or not
  ASSERT_EQ(a.slow.size(), 1u);
  const SlowGroup& g = a.slow[0];
  EXPECT_EQ(g.kind, SlowKind::kPeriodic);
  EXPECT_EQ(g.period, 5);
  EXPECT_EQ(g.steps, (std::vector<size_t>{5, 10, 15, 20, 25}));
  // AND its excess is the stalls' own, the detail's cost taken out:
  // 5 x 25 ms, over the 29 steps' undetailed time (29 x 10 + 5 x 25 ms)
  EXPECT_NEAR(static_cast<double>(g.excess_ns), 125.0 * kMs, 3.0 * kMs);
  EXPECT_NEAR(g.share, 125.0 / 415.0, 0.01);
}

TEST(DetailWindows, TheLaunchersOwnWorkInAWindowIsNotTakenForTheScriptsTime) {
  // GIVEN 40 steps of 11 ms: a 1 ms fetch, the module's forward 3 ms, 1 ms
  // of Python before backward ("other"), backward 4 ms, SGD.step 2 ms;
  // detailed in 0-2 and 20-24; and the graph watch's 3 ms look (the
  // launcher's user scope) at the start of steps 2, 4, 8, 16, 21, 23 and
  // 32, two of them inside the window, one in an undetailed step
  const std::vector<int> looks = {2, 4, 8, 16, 21, 23, 32};
  RunBuilder rb;
  rb.run.modules = {ModuleInfo{"Net", "Net", 10, -1}};
  rb.run.env.optimizers = {OptimizerFacts{"SGD", 2, false}};
  rb.run.detail_mode = "window";
  int64_t t = 0, window_start = 0;
  for (int k = 0; k < 40; ++k) {
    const bool detail = k < 3 || (k >= 20 && k < 25);
    if (k == 20) window_start = t;
    if (std::find(looks.begin(), looks.end(), k) != looks.end()) {
      rb.event("torchneck::graph_watch", OpKind::kUserScope, t, t + 3 * kMs);
      t += 3 * kMs;
    }
    rb.event("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", OpKind::kUserScope, t, t + kMs);
    if (detail) {
      rb.module(0, t + kMs, t + 4 * kMs);
      rb.event("aten::addmm", OpKind::kOperator, t + 2 * kMs, t + 4 * kMs, k);
      rb.event("AddmmBackward0", OpKind::kBackward, t + 5 * kMs, t + 9 * kMs, k);
    }
    rb.event("torchneck::backward", OpKind::kUserScope, t + 5 * kMs, t + 9 * kMs);
    rb.event("Optimizer.step#SGD.step", OpKind::kUserScope, t + 9 * kMs, t + 11 * kMs);
    t += 11 * kMs;
    if (k == 2) rb.run.detail_spans.emplace_back(0, t);
    if (k == 24) rb.run.detail_spans.emplace_back(window_start, t);
  }
  rb.finish();
  // WHEN the steps are analysed
  const StepAnalysis a = analyze_steps(rb.run);
  ASSERT_EQ(a.steps.size(), 40u);
  ASSERT_FALSE(a.steps[32].detailed);
  ASSERT_TRUE(a.steps[21].detailed);
  // THEN each look is the launcher's time, in "other"
  EXPECT_EQ(a.steps[21].tool_ns, 3 * kMs);
  EXPECT_EQ(a.steps[32].tool_ns, 3 * kMs);
  EXPECT_EQ(a.steps[10].tool_ns, 0);
  // AND the undetailed steps' forward is the planted 3 ms, with or without
  // a look (the detailed steps' looks taken for Python between their
  // operators put it at 4 x 21 / 37 ms = 2.27 ms: steps 1-2 and 20-24 have
  // 21 ms of forward in 37 ms of light "other", 9 ms of it looks)
  EXPECT_NEAR(static_cast<double>(a.steps[10].breakdown[Phase::kForward]), 3.0 * kMs, 1e3);
  EXPECT_NEAR(static_cast<double>(a.steps[32].breakdown[Phase::kForward]), 3.0 * kMs, 1e3);
  // AND a look outside the windows stays in its step's "other", with the
  // 1 ms of Python
  EXPECT_NEAR(static_cast<double>(a.steps[32].breakdown[Phase::kOther]), 4.0 * kMs, 1e3);
  EXPECT_EQ(a.steps[32].breakdown.total(), a.steps[32].duration());
  // AND the run's forward is 3 ms a step
  EXPECT_NEAR(static_cast<double>(a.breakdown[Phase::kForward]), 3.0 * kMs, 1e3);
}

TEST(DetailWindows, AFullDetailRunIsUnchanged) {
  // GIVEN the same steps, all detailed, mode "full"
  RunBuilder rb;
  rb.run.modules = {ModuleInfo{"Net", "Net", 10, -1}};
  rb.run.env.optimizers = {OptimizerFacts{"SGD", 2, false}};
  rb.run.detail_mode = "full";
  int64_t t = 0;
  for (int k = 0; k < 40; ++k) t = step(rb, t, k, true);
  rb.run.detail_spans.emplace_back(0, t);
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  EXPECT_EQ(a.estimated_steps, 0u);
  EXPECT_NEAR(static_cast<double>(a.breakdown[Phase::kBackward]), 4.0 * kMs, 1e3);
}

}  // namespace
}  // namespace torchneck
