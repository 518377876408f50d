// The operators a loop issues itself (TopLevelOps): an operator's nested
// calls are its own, not the loop's, on hand-built runs whose counts are
// known by construction.
#include <gtest/gtest.h>

#include "analyze/diagnosis.h"
#include "analyze/steps.h"
#include "run_builder.h"

namespace torchneck {
namespace {

using test_support::RunBuilder;

constexpr int64_t kUs = 1'000;

// 20 steps of: one aten::bmm of `big_us` that calls `nested` aten::select of
// 2 us each, then `small` aten::add of 3 us each at 4 us intervals, then the
// optimizer's step of 100 us.
RunBuilder calls_run(int64_t big_us, int nested, int small) {
  RunBuilder rb;
  rb.run.env.optimizers = {OptimizerFacts{"SGD", 2, false}};
  int64_t t = 0;
  for (int i = 0; i < 20; ++i) {
    rb.event("aten::bmm", OpKind::kOperator, t, t + big_us * kUs, 2 * i);
    for (int k = 0; k < nested; ++k)
      rb.event("aten::select", OpKind::kOperator, t + (10 + 3 * k) * kUs, t + (12 + 3 * k) * kUs);
    t += big_us * kUs;
    for (int k = 0; k < small; ++k, t += 4 * kUs) rb.event("aten::add", OpKind::kOperator, t, t + 3 * kUs, 2 * i + 1);
    rb.event("Optimizer.step#SGD.step", OpKind::kUserScope, t, t + 100 * kUs);
    t += 100 * kUs;
  }
  rb.finish();
  return rb;
}

const Finding* framework_overhead(const Diagnosis& d) {
  for (const Finding& f : d.findings)
    if (f.id == "framework_overhead") return &f;
  return nullptr;
}

TEST(TopLevelOps, AnOperatorsNestedCallsAreNotTheLoops) {
  // GIVEN steps of one 1 ms bmm that calls 300 selects, and 10 adds
  RunBuilder rb = calls_run(1000, 300, 10);
  const StepAnalysis a = analyze_steps(rb.run);
  ASSERT_EQ(a.source, "optimizer");
  // THEN every operator counts in ops_per_step, the loop's own 11 in top_level_ops
  EXPECT_NEAR(a.ops_per_step, 311.0, 1e-9);
  EXPECT_NEAR(a.top_level_ops.per_step, 11.0, 1e-9);
  EXPECT_NEAR(a.top_level_ops.ns_per_step, static_cast<double>(1000 * kUs + 10 * 3 * kUs), 1.0);
  EXPECT_NEAR(a.top_level_ops.small_per_step, 10.0, 1e-9);
  // and the most called is the add, 10 a step
  ASSERT_FALSE(a.top_level_ops.most_called.empty());
  EXPECT_EQ(a.top_level_ops.most_called[0].first, "aten::add");
  EXPECT_NEAR(a.top_level_ops.most_called[0].second, 10.0, 1e-9);
  // WHEN diagnosed THEN no "many small operators": the loop made 11 calls
  EXPECT_EQ(framework_overhead(diagnose(diagnosis_input(rb.run, a, LayerAnalysis{}))), nullptr);
}

TEST(TopLevelOps, ManySmallCallsBesideALargeOneAreNotTheCompute) {
  // GIVEN steps of a 1 ms bmm and 220 adds of 3 us: many small calls, but
  // they and the time between calls are 0.76 of 1.76 ms compute
  RunBuilder rb = calls_run(1000, 0, 220);
  const StepAnalysis a = analyze_steps(rb.run);
  EXPECT_NEAR(a.top_level_ops.small_per_step, 220.0, 1e-9);
  // THEN the large call is the compute: no finding
  EXPECT_EQ(framework_overhead(diagnose(diagnosis_input(rb.run, a, LayerAnalysis{}))), nullptr);
}

TEST(TopLevelOps, ManySmallCallsAreFrameworkOverheadUpToTheirShare) {
  // GIVEN steps of a 200 us bmm and 220 adds of 3 us
  RunBuilder rb = calls_run(200, 0, 220);
  const StepAnalysis a = analyze_steps(rb.run);
  EXPECT_NEAR(a.top_level_ops.per_step, 221.0, 1e-9);
  EXPECT_NEAR(a.top_level_ops.small_ns_per_step, 220.0 * 3 * kUs, 1.0);
  // (the compute: 0.86 ms of calls, the optimizer's 0.1 ms between them)
  EXPECT_NEAR(a.top_level_ops.compute_ns_per_step, 960.0 * kUs, 1e3);
  const Finding* f = framework_overhead(diagnose(diagnosis_input(rb.run, a, LayerAnalysis{})));
  ASSERT_NE(f, nullptr);
  // THEN its gain is an upper bound computed from what was measured: the
  // small calls' 0.66 ms and the 0.1 ms between calls, of the 0.96 ms
  // compute, x compute's share of the 1.18 ms step (0.22 ms of gaps)
  ASSERT_TRUE(f->estimated_gain_pct.has_value());
  EXPECT_TRUE(f->gain_is_upper_bound);
  EXPECT_NEAR(*f->estimated_gain_pct, 100.0 * (0.66 + 0.1) / 0.96 * (0.96 / 1.18), 0.05);
}

}  // namespace
}  // namespace torchneck
