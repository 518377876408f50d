// What analysis makes of torch.compile's record functions, on hand-built
// runs whose answer is known by construction (the names are torch 2.6's,
// seen in a live run of tests/python/scripts/compiled_model.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "analyze/compiled.h"
#include "analyze/layers.h"
#include "analyze/steps.h"
#include "run_builder.h"

namespace torchneck {
namespace {

using Builder = test_support::RunBuilder;

// GIVEN four training steps of a compiled Net (the OptimizedModule seen from
// outside), each: forward [s, s+100) holding the region and CompiledFunction,
// backward CompiledFunctionBackward [s+100, s+180), optimizer [s+180, s+200);
// the first step also compiles: 1000 ns of dynamo_timed scopes in forward
// (two nested, one overlapping on another thread; a pattern's forward op
// and backward node run inside them) and 500 in backward.
Builder compiled_run() {
  Builder b;
  b.run.modules = {ModuleInfo{"Net", "Net", 10, -1, true}};
  int64_t s = 0;
  for (int step = 0; step < 4; ++step) {
    const int64_t compile_fwd = step == 0 ? 1000 : 0, compile_bwd = step == 0 ? 500 : 0;
    const int64_t f = s + compile_fwd;
    b.module(0, s, f + 100);
    if (step == 0) {
      b.event("_compile.compile_inner (dynamo_timed)", OpKind::kUserScope, s, s + 1000);
      b.event("compile_fx_inner (dynamo_timed)", OpKind::kUserScope, s + 100, s + 900);
      b.event("compile_file (dynamo_timed)", OpKind::kUserScope, s + 500, s + 950, -1, 1);
      // inductor tracing a pattern on real tensors: forward and backward
      // while compiling, inside Net's call
      b.event("aten::relu", OpKind::kOperator, s + 200, s + 210, 100);
      b.event("ReluBackward0", OpKind::kBackward, s + 300, s + 340, 100);
    }
    b.event("Torch-Compiled Region: 0/0", OpKind::kOperator, s, f + 100);
    b.event("CompiledFunction", OpKind::kOperator, f + 10, f + 90, 7 + step);
    const int64_t bw = f + 100;
    if (step == 0) b.event("compile_fx.<locals>.bw_compiler (dynamo_timed)", OpKind::kUserScope, bw, bw + 500);
    b.event("CompiledFunctionBackward", OpKind::kBackward, bw, bw + compile_bwd + 80, 7 + step);
    const int64_t o = bw + compile_bwd + 80;
    b.event("Optimizer.step#SGD.step", OpKind::kUserScope, o, o + 20);
    s = o + 20;
  }
  b.finish();
  return b;
}

TEST(Compiled, RegionsCompilationAndItsStepsAreSeen) {
  Builder b = compiled_run();
  // WHEN steps and the compiled regions are analysed
  const StepAnalysis steps = analyze_steps(b.run);
  const CompileAnalysis c = analyze_compiled(b.run, steps);
  // THEN one graph, called once per step, its forward and backward graphs
  // counted; compilation is the union of the timed scopes (1000 + 500)
  EXPECT_TRUE(c.seen);
  EXPECT_EQ(c.modules, std::vector<std::string>{"Net"});
  EXPECT_EQ(c.graphs, std::vector<std::string>{"Torch-Compiled Region: 0/0"});
  EXPECT_EQ(c.recompiles, 0u);
  EXPECT_EQ(c.region_calls, 4u);
  EXPECT_EQ(c.forward_calls, 4u);
  EXPECT_EQ(c.backward_calls, 4u);
  EXPECT_EQ(c.backward_ns, 4 * 80 + 500);
  EXPECT_EQ(c.compile_ns, 1500);
  ASSERT_EQ(steps.steps.size(), 4u);
  EXPECT_EQ(c.compile_steps, std::vector<size_t>{0});
  EXPECT_FALSE(steps.steps[0].steady);
  // the steady steps are 200 ns: 100 forward, 80 backward, 20 optimizer
  EXPECT_EQ(steps.step_ns, 200);
  EXPECT_EQ(steps.breakdown[Phase::kForward], 100);
  EXPECT_EQ(steps.breakdown[Phase::kBackward], 80);
  EXPECT_EQ(steps.breakdown[Phase::kOptimizer], 20);
}

TEST(Compiled, ALaterCompilationIsNotSteadyEvenWhenShort) {
  // GIVEN the same run, and a recompilation of 10 ns in step 3 (5 % of a
  // step: no outlier by duration)
  Builder b = compiled_run();
  const int64_t t = b.run.timeline.back().start_ns - 150;
  b.event("_compile.compile_inner (dynamo_timed)", OpKind::kUserScope, t, t + 10);
  b.event("Torch-Compiled Region: 0/1", OpKind::kOperator, t, t + 20);
  b.finish();
  const StepAnalysis steps = analyze_steps(b.run);
  const CompileAnalysis c = analyze_compiled(b.run, steps);
  // THEN the step is left out of the median, and the graph counts as a recompilation
  EXPECT_EQ(c.compile_steps, (std::vector<size_t>{0, 3}));
  EXPECT_FALSE(steps.steps[3].steady);
  EXPECT_TRUE(steps.steps[2].steady);
  EXPECT_EQ(c.recompiles, 1u);
  EXPECT_EQ(c.graphs.size(), 2u);
}

TEST(Compiled, TheCompiledModuleCarriesItsRegionAndIsNoLeaf) {
  Builder b = compiled_run();
  const LayerAnalysis l = analyze_layers(b.run);
  ASSERT_EQ(l.layers.size(), 1u);
  const LayerStats& net = l.layers[0];
  EXPECT_TRUE(net.compiled);
  EXPECT_FALSE(net.leaf);  // its children ran unseen inside the compiled region
  EXPECT_EQ(net.calls, 4u);
  EXPECT_EQ(net.forward_ns, 4 * 100 + 1000);
  // CompiledFunctionBackward matches CompiledFunction by sequence number,
  // which ran inside Net
  EXPECT_EQ(net.backward_ns, 4 * 80 + 500);
  // the backward node run while compiling is compile work, in no layer
  EXPECT_EQ(l.backward_unattributed_ns, 40);
}

TEST(Compiled, AnEagerRunShowsNothing) {
  Builder b;
  b.run.modules = {ModuleInfo{"Net", "Net", 10, -1}};
  b.module(0, 0, 100);
  b.event("aten::addmm", OpKind::kOperator, 10, 90, 1);
  b.finish();
  const CompileAnalysis c = analyze_compiled(b.run, analyze_steps(b.run));
  EXPECT_FALSE(c.seen);
  EXPECT_EQ(c.compile_ns, 0);
}

}  // namespace
}  // namespace torchneck
