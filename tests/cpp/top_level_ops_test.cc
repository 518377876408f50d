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
constexpr int64_t kMs = 1'000'000;

// 20 steps of 2 ms: one aten::bmm of 1 ms that calls `nested` aten::select
// of 2 us each, then `small` aten::add of 3 us each at 4 us intervals, then
// the optimizer's step. Returns the run.
RunBuilder nested_calls_run(int nested, int small) {
  RunBuilder rb;
  rb.run.env.optimizers = {OptimizerFacts{"SGD", 2, false}};
  int64_t t = 0;
  for (int i = 0; i < 20; ++i) {
    rb.event("aten::bmm", OpKind::kOperator, t, t + kMs, 2 * i);
    for (int k = 0; k < nested; ++k)
      rb.event("aten::select", OpKind::kOperator, t + 10 * kUs + 3 * k * kUs, t + 12 * kUs + 3 * k * kUs);
    int64_t u = t + kMs;
    for (int k = 0; k < small; ++k, u += 4 * kUs) rb.event("aten::add", OpKind::kOperator, u, u + 3 * kUs, 2 * i + 1);
    rb.event("Optimizer.step#SGD.step", OpKind::kUserScope, t + 1900 * kUs, t + 2 * kMs);
    t += 2 * kMs;
  }
  rb.finish();
  return rb;
}

TEST(TopLevelOps, AnOperatorsNestedCallsAreNotTheLoops) {
  // GIVEN steps of one bmm that calls 300 selects, and 10 adds
  RunBuilder rb = nested_calls_run(300, 10);
  const StepAnalysis a = analyze_steps(rb.run);
  ASSERT_EQ(a.source, "optimizer");
  // THEN every operator counts in ops_per_step, the loop's own 11 in top_level_ops
  EXPECT_NEAR(a.ops_per_step, 311.0, 1e-9);
  EXPECT_NEAR(a.top_level_ops.per_step, 11.0, 1e-9);
  EXPECT_NEAR(a.top_level_ops.ns_per_step, static_cast<double>(kMs + 10 * 3 * kUs), 1.0);
  // and the most called is the add, 10 a step
  ASSERT_FALSE(a.top_level_ops.most_called.empty());
  EXPECT_EQ(a.top_level_ops.most_called[0].first, "aten::add");
  EXPECT_NEAR(a.top_level_ops.most_called[0].second, 10.0, 1e-9);
  // WHEN diagnosed THEN no "many small operators": the loop made 11 calls
  const Diagnosis d = diagnose(diagnosis_input(rb.run, a, LayerAnalysis{}));
  for (const Finding& f : d.findings) EXPECT_NE(f.id, FindingId::framework_overhead) << f.title;
}

TEST(TopLevelOps, ManySmallCallsAreFrameworkOverheadWithAMeasuredGain) {
  // GIVEN steps of one 1 ms bmm and 220 adds of 3 us at 4 us intervals
  RunBuilder rb = nested_calls_run(0, 220);
  const StepAnalysis a = analyze_steps(rb.run);
  EXPECT_NEAR(a.top_level_ops.per_step, 221.0, 1e-9);
  // THEN the floor is an add's 3 us (the 10th percentile of the calls' times)
  EXPECT_EQ(a.top_level_ops.floor_ns, 3 * kUs);
  const Diagnosis d = diagnose(diagnosis_input(rb.run, a, LayerAnalysis{}));
  const Finding* f = nullptr;
  for (const Finding& x : d.findings)
    if (x.id == FindingId::framework_overhead) f = &x;
  ASSERT_NE(f, nullptr);
  // AND the gain is computed from what was measured: at most the calls'
  // floors and the compute between them, never the whole compute
  const TopLevelOps& t = a.top_level_ops;
  const double between = std::max(0.0, t.compute_ns_per_step - t.ns_per_step);
  const double removable = std::min(1.0, (t.per_step * static_cast<double>(t.floor_ns) + between) / t.compute_ns_per_step);
  const double compute_share = static_cast<double>(a.breakdown.compute()) / static_cast<double>(a.step_ns);
  EXPECT_NEAR(f->estimated_gain_pct, 100.0 * removable * compute_share, 1e-6);
  EXPECT_LT(removable, 1.0);
}

}  // namespace
}  // namespace torchneck
