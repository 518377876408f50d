// The whole run by its step clocks (analyze/run_clocks.h), where the
// timeline holds its first part only: planted clocks, thinned as the
// collector thins them, whose steps' times and data waits are known; and
// step_time_drift reading the whole run's trend from them.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "analyze/diagnosis.h"
#include "analyze/memory.h"
#include "analyze/run_clocks.h"
#include "collect/system/thinned_series.h"

namespace torchneck {
namespace {

constexpr int64_t kMs = 1'000'000;

// A run of `steps` steps of `k` boundaries each on thread 0: step i (from
// 1) takes step_ms(i), of which 2 ms in fetches, its boundaries evenly
// inside it. The clocks are kept as the collector keeps them: a series of
// `capacity` thinned as it fills, and the last one.
template <typename StepMs>
Run clocked_run(uint64_t steps, uint64_t k, size_t capacity, StepMs step_ms, std::vector<int64_t>* ends) {
  Run run;
  ThinnedSeries<StepClock> series(capacity);
  StepClock last;
  int64_t t = 0, data = 0;
  uint64_t b = 0;
  for (uint64_t i = 1; i <= steps; ++i) {
    const auto d = static_cast<int64_t>(step_ms(i) * kMs);
    data += 2 * kMs;
    for (uint64_t j = 1; j <= k; ++j) {
      last = StepClock{t + d * static_cast<int64_t>(j) / static_cast<int64_t>(k), 0, -1, 0, ++b, data};
      series.tick(last);
    }
    t += d;
    ends->push_back(t);
  }
  run.step_clocks = series.samples();
  if (run.step_clocks.back().step < last.step) run.step_clocks.push_back(last);
  return run;
}

TEST(RunClocks, TheStepsBeyondTheTimelineAndTheWholeRun) {
  // GIVEN 1000 steps of two optimizers each, 10 ms until step 500, then
  // 20 ms, the clocks thinned to a 256-entry series; the timeline's last
  // step is step 300
  std::vector<int64_t> ends;
  const torchneck::Run run = clocked_run(1000, 2, 256, [](uint64_t i) { return i <= 500 ? 10.0 : 20.0; }, &ends);
  ASSERT_LT(run.step_clocks.size(), 260u);  // thinned: every 8th boundary or so
  // WHEN read against the run's 1000 steps
  const RunClocks c = run_clocks(run, 1000, ends[299]);
  // THEN two boundaries a step, the run to its last step
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c.boundaries_per_step, 2u);
  EXPECT_EQ(c.last_step, 1000u);
  // and the steps after the timeline from the first clock after its end:
  // their mean is the planted one over exactly those steps
  EXPECT_GE(c.beyond_first_step, 300u);
  EXPECT_LE(c.beyond_first_step, 310u);
  EXPECT_EQ(c.beyond_first_step + c.beyond_steps, 1000u);
  const double before = static_cast<double>(500 - c.beyond_first_step);
  const double expected = (before * 10.0 + 500.0 * 20.0) / static_cast<double>(c.beyond_steps);
  EXPECT_NEAR(c.beyond_step_ns / kMs, expected, 0.05);
  EXPECT_NEAR(c.beyond_data_ns / kMs, 2.0, 0.01);  // a clock at a step's first boundary: half a step off
  // and the whole run's mean, from the end of the first clock's step (a
  // half step: its first boundary) to the end
  EXPECT_NEAR(c.step_ns / kMs, 15.0, 0.05);
  EXPECT_NEAR(c.data_ns / kMs, 2.0, 0.01);
  // and intervals of equal steps, the last one aside
  ASSERT_GE(c.intervals.size(), 100u);
  for (size_t i = 0; i + 1 < c.intervals.size(); ++i) EXPECT_EQ(c.intervals[i].steps, c.intervals[0].steps);
}

TEST(RunClocks, NothingWhereTheCountIsNotTheBoundaries) {
  std::vector<int64_t> ends;
  const torchneck::Run run = clocked_run(1000, 1, 4096, [](uint64_t) { return 10.0; }, &ends);
  // A count of the timeline's steps only (not the run's), or a run whose
  // timeline holds every step: nothing beyond it
  EXPECT_TRUE(run_clocks(run, 300, ends[299]).empty());
  EXPECT_TRUE(run_clocks(run, 1000, ends.back()).empty());
  EXPECT_FALSE(run_clocks(run, 1000, ends[299]).empty());
  // Clocks of a spill from before the step counts
  torchneck::Run old = run;
  for (StepClock& c : old.step_clocks) c.step = 0;
  EXPECT_TRUE(run_clocks(old, 1000, ends[299]).empty());
}

const Finding* drift(const std::vector<Finding>& fs) {
  for (const Finding& f : fs)
    if (f.id == "step_time_drift") return &f;
  return nullptr;
}

TEST(RunClocks, DriftAfterTheTimelineFilledIsFoundOverTheWholeRun) {
  // GIVEN 3000 steps of 10 ms until step 1000, then growing by 10 ms over
  // the rest; the timeline holds the first 300, flat
  std::vector<int64_t> ends;
  const auto ms = [](uint64_t i) { return i <= 1000 ? 10.0 : 10.0 + 10.0 * static_cast<double>(i - 1000) / 2000.0; };
  const torchneck::Run run = clocked_run(3000, 1, 512, ms, &ends);
  DiagnosisInput in;
  StepAnalysis& s = in.steps;
  s.source = "optimizer";
  s.timeline_truncated = true;
  s.count = 3000;
  for (size_t i = 0; i < 300; ++i) {
    Step st;
    st.start_ns = i == 0 ? 0 : ends[i - 1];
    st.end_ns = ends[i];
    st.steady = i >= 3;
    st.breakdown.ns[static_cast<int>(Phase::kForward)] = st.duration();
    if (st.steady) s.steady_ns += st.duration(), ++s.steady_count;
    s.steps.push_back(st);
  }
  s.step_ns = s.steady_ns / static_cast<int64_t>(s.steady_count);
  s.typical_ns = s.step_ns;
  s.breakdown.ns[static_cast<int>(Phase::kForward)] = s.step_ns;
  // WHEN the timeline's steps alone are read: no drift (they are flat)
  EXPECT_EQ(drift(run_detectors(in, Evidence::kCpu)), nullptr);
  // WHEN the whole run's clocks are there too
  s.whole_run = run_clocks(run, 3000, ends[299]);
  ASSERT_FALSE(s.whole_run.empty());
  const std::vector<Finding> fs = run_detectors(in, Evidence::kCpu);
  const Finding* f = drift(fs);
  // THEN the drift is found, its growth the planted one's thirds: the first
  // third (steps 4..1000) at 10 ms, the last (2001..3000) at a median of
  // 17.5 ms
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->numbers[0].second, 75.0, 3.0);
  EXPECT_NE(f->evidence[0].find("step clocks"), std::string::npos) << f->evidence[0];
}

TEST(RunClocks, TheSteadySpanRunsToTheRunsLastStep) {
  // GIVEN 1000 steps whose timeline holds the first 300 (steady from the
  // 4th)
  std::vector<int64_t> ends;
  const torchneck::Run run = clocked_run(1000, 1, 256, [](uint64_t) { return 10.0; }, &ends);
  StepAnalysis s;
  for (size_t i = 0; i < 300; ++i) {
    Step st;
    st.start_ns = i == 0 ? 0 : ends[i - 1];
    st.end_ns = ends[i];
    st.steady = i >= 3;
    s.steps.push_back(st);
  }
  // WHEN the span is read without the clocks, then with them
  const SteadySpan timeline_only = steady_span(s);
  s.whole_run = run_clocks(run, 1000, ends[299]);
  ASSERT_FALSE(s.whole_run.empty());
  const SteadySpan whole = steady_span(s);
  // THEN the timeline's steady steps, then on to the run's last step (the
  // memory samples, collections and GPU samples are read over it)
  EXPECT_EQ(timeline_only.first, 3u);
  EXPECT_EQ(timeline_only.last, 299u);
  EXPECT_EQ(timeline_only.end_ns, ends[299]);
  EXPECT_EQ(whole.first, 3u);
  EXPECT_EQ(whole.start_ns, ends[2]);
  EXPECT_EQ(whole.last, 999u);
  EXPECT_EQ(whole.end_ns, ends.back());
  EXPECT_EQ(whole.steps(), 997u);
}

}  // namespace
}  // namespace torchneck
