// Step detection, phase attribution and layer attribution on hand-built
// runs whose answer is known by construction.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "analyze/layers.h"
#include "analyze/steps.h"
#include "run_builder.h"

namespace torchneck {
namespace {

using RunBuilder = test_support::RunBuilder;

TEST(AttributePhases, HigherPriorityWinsAndTheRestIsOther) {
  // GIVEN loose forward operators [0,100) containing data [10,30) and an optimizer step [80,120)
  const std::vector<PhaseInterval> iv = {
      {0, 100, Phase::kForward, true}, {10, 30, Phase::kData}, {80, 120, Phase::kOptimizer}};
  // WHEN the step [0,150) is split
  const StepBreakdown b = attribute_phases(iv, 0, 150);
  // THEN each instant counts once, by priority data > optimizer > loose operators
  EXPECT_EQ(b[Phase::kData], 20);
  EXPECT_EQ(b[Phase::kOptimizer], 40);
  EXPECT_EQ(b[Phase::kForward], 60);
  EXPECT_EQ(b[Phase::kOther], 30);
  EXPECT_EQ(b.total(), 150);
}

TEST(AttributePhases, ModuleCallsInsideTheOptimizerStepAreForwardAndBackward) {
  // GIVEN optimizer.step(closure) [0,100) (LBFGS) whose closure calls the
  // model [10,40) and runs backward [40,80); the optimizer's own update
  // operators [85,95) are loose forward operators
  const std::vector<PhaseInterval> iv = {{0, 100, Phase::kOptimizer}, {10, 40, Phase::kForward},
                                         {40, 80, Phase::kBackward}, {85, 95, Phase::kForward, true}};
  const StepBreakdown b = attribute_phases(iv, 0, 100);
  // THEN forward and backward are the model's, the rest the optimizer's
  EXPECT_EQ(b[Phase::kForward], 30);
  EXPECT_EQ(b[Phase::kBackward], 40);
  EXPECT_EQ(b[Phase::kOptimizer], 30);
  EXPECT_EQ(b.total(), 100);
}

TEST(AttributePhases, EvaluationHoldsEverythingInsideItsPass) {
  // GIVEN an evaluation pass [100,200) with a validation fetch [100,120) and
  // a module call [120,190) inside, after a training fetch [0,50)
  const std::vector<PhaseInterval> iv = {{0, 50, Phase::kData}, {100, 200, Phase::kEvaluation},
                                         {100, 120, Phase::kData}, {120, 190, Phase::kForward}};
  const StepBreakdown b = attribute_phases(iv, 0, 200);
  EXPECT_EQ(b[Phase::kData], 50);
  EXPECT_EQ(b[Phase::kEvaluation], 100);
  EXPECT_EQ(b[Phase::kForward], 0);
  EXPECT_EQ(b[Phase::kOther], 50);
}

TEST(Steps, TwoOptimizersPerIterationCountOnce) {
  // GIVEN 4 iterations, each: data, forward op, backward node, D.step, G.step
  RunBuilder rb;
  rb.run.env.optimizers = {OptimizerFacts{"Adam", 4, false}, OptimizerFacts{"Adam", 4, false}};
  for (int i = 0; i < 4; ++i) {
    const int64_t t = i * 1000;
    rb.event("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", OpKind::kUserScope, t, t + 400);
    rb.event("aten::mm", OpKind::kOperator, t + 400, t + 500, i);
    rb.event("MmBackward0", OpKind::kBackward, t + 500, t + 700, i);
    rb.event("Optimizer.step#Adam.step", OpKind::kUserScope, t + 700, t + 800);
    rb.event("Optimizer.step#Adam.step", OpKind::kUserScope, t + 850, t + 950);
  }
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  EXPECT_EQ(a.source, "optimizer");
  ASSERT_EQ(a.count, 4u);
  // iteration 1 spans (950, 1950]: data 400, forward 100, backward 200, optimizer 200, other 100
  const StepBreakdown& b = a.steps[1].breakdown;
  EXPECT_EQ(a.steps[1].duration(), 1000);
  EXPECT_EQ(b[Phase::kData], 400);
  EXPECT_EQ(b[Phase::kForward], 100);
  EXPECT_EQ(b[Phase::kBackward], 200);
  EXPECT_EQ(b[Phase::kOptimizer], 200);
  EXPECT_EQ(b[Phase::kOther], 100);
  EXPECT_FALSE(a.steps[0].steady);  // first step: warm-up
  EXPECT_EQ(a.excluded, 1u);
  EXPECT_EQ(a.breakdown.total(), a.step_ns);
}

TEST(Steps, OneOptimizerPerLayerTrainedInTurnIsAStepPerUpdate) {
  // GIVEN two Adam optimizers, one per layer, the first stepped 6 times and
  // then the second 6 times, each update with its own forward and
  // backward, on the whole dataset read from a DataLoader once before (a
  // forward-forward trainer)
  RunBuilder rb;
  rb.run.env.optimizers = {OptimizerFacts{"Adam", 2, false}, OptimizerFacts{"Adam", 2, false}};
  rb.run.modules = {ModuleInfo{"first", "Linear", 2, -1}, ModuleInfo{"second", "Linear", 2, -1}};
  rb.event("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", OpKind::kUserScope, 0, 500);
  for (int i = 0; i < 12; ++i) {
    const int64_t t = 1000 + i * 1000;
    rb.module(i < 6 ? 0 : 1, t, t + 300);
    rb.event("aten::mm", OpKind::kOperator, t, t + 300, i);
    rb.event("MmBackward0", OpKind::kBackward, t + 300, t + 700, i);
    rb.event("Optimizer.step#Adam.step", OpKind::kUserScope, t + 700, t + 900);
  }
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  // THEN every update is a step, not every second one
  EXPECT_EQ(a.source, "optimizer");
  EXPECT_EQ(a.count, 12u);
  EXPECT_EQ(a.steps[3].duration(), 1000);
}

TEST(Steps, AGansTwoUpdatesWithoutALoaderAreOneStepByTheirModuleCalls) {
  // GIVEN a GAN's loop without a DataLoader, 5 iterations: G makes a
  // sample, D judges real and fake, D's backward and step; D judges the
  // fake again, G's and D's backward and G's step (two Adams)
  RunBuilder rb;
  rb.run.env.optimizers = {OptimizerFacts{"Adam", 2, false}, OptimizerFacts{"Adam", 2, false}};
  rb.run.modules = {ModuleInfo{"G", "Sequential", 2, -1}, ModuleInfo{"D", "Sequential", 2, -1}};
  for (int i = 0; i < 5; ++i) {
    const int64_t t = i * 2000;
    rb.module(0, t, t + 100);
    rb.event("aten::mm", OpKind::kOperator, t, t + 100, 3 * i);
    rb.module(1, t + 100, t + 200);
    rb.event("aten::mm", OpKind::kOperator, t + 100, t + 200, 3 * i + 1);
    rb.module(1, t + 200, t + 300);
    rb.event("MmBackward0", OpKind::kBackward, t + 300, t + 500, 3 * i + 1);
    rb.event("Optimizer.step#Adam.step", OpKind::kUserScope, t + 500, t + 600);
    rb.module(1, t + 600, t + 800);
    rb.event("aten::mm", OpKind::kOperator, t + 600, t + 800, 3 * i + 2);
    rb.event("MmBackward0", OpKind::kBackward, t + 800, t + 1000, 3 * i + 2);
    rb.event("MmBackward0", OpKind::kBackward, t + 1000, t + 1200, 3 * i);
    rb.event("Optimizer.step#Adam.step", OpKind::kUserScope, t + 1200, t + 2000);
  }
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  // THEN each iteration is one step: the module calls repeat every 2 updates
  EXPECT_EQ(a.source, "optimizer");
  ASSERT_EQ(a.count, 5u);
  EXPECT_EQ(a.steps[2].duration(), 2000);
}

TEST(Steps, UpdatesOnOneBatchAreOneStepHoweverMany) {
  // GIVEN a GAN's loop over 6 batches: each a fetch and a discriminator
  // update, every second batch also a generator update after it (9
  // optimizer steps of 2 optimizers)
  RunBuilder rb;
  rb.run.env.optimizers = {OptimizerFacts{"Adam", 2, false}, OptimizerFacts{"Adam", 2, false}};
  int64_t t = 0;
  for (int i = 0; i < 6; ++i) {
    rb.event("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", OpKind::kUserScope, t, t + 100);
    rb.event("aten::mm", OpKind::kOperator, t + 100, t + 200, 2 * i);
    rb.event("MmBackward0", OpKind::kBackward, t + 200, t + 400, 2 * i);
    rb.event("Optimizer.step#Adam.step", OpKind::kUserScope, t + 400, t + 500);
    t += 500;
    if (i % 2 == 1) {
      rb.event("aten::mm", OpKind::kOperator, t, t + 100, 2 * i + 1);
      rb.event("MmBackward0", OpKind::kBackward, t + 100, t + 300, 2 * i + 1);
      rb.event("Optimizer.step#Adam.step", OpKind::kUserScope, t + 300, t + 400);
      t += 400;
    }
  }
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  // THEN each batch is one step, whatever it updated
  EXPECT_EQ(a.source, "optimizer");
  ASSERT_EQ(a.count, 6u);
  EXPECT_EQ(a.steps[2].duration(), 500);
  EXPECT_EQ(a.steps[3].duration(), 900);
}

TEST(Steps, ProfilerStepScopesComeFirst) {
  // GIVEN torch.profiler's ProfilerStep#N scopes around optimizer-stepped iterations
  RunBuilder rb;
  for (int i = 0; i < 3; ++i) {
    const int64_t t = i * 100;
    rb.event("ProfilerStep#" + std::to_string(i + 5), OpKind::kUserScope, t, t + 90);
    rb.event("aten::mm", OpKind::kOperator, t + 10, t + 40, i);
    rb.event("Optimizer.step#SGD.step", OpKind::kUserScope, t + 50, t + 80);
  }
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  EXPECT_EQ(a.source, "profiler_step");
  ASSERT_EQ(a.count, 3u);
  EXPECT_EQ(a.steps[2].start_ns, 200);
  EXPECT_EQ(a.steps[2].end_ns, 290);
  EXPECT_EQ(a.steps[2].breakdown[Phase::kOptimizer], 30);
}

TEST(Steps, BackwardPassesWithoutOptimizerOrDataLoader) {
  RunBuilder rb;
  for (int i = 0; i < 5; ++i) {
    const int64_t t = i * 100;
    rb.event("aten::mm", OpKind::kOperator, t, t + 30, i);
    rb.event("autograd::engine::evaluate_function: MmBackward0", OpKind::kOperator, t + 30, t + 70);
    rb.event("MmBackward0", OpKind::kBackward, t + 31, t + 69, i);
    rb.event("aten::sub_", OpKind::kOperator, t + 75, t + 90);  // the manual update
  }
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  EXPECT_EQ(a.source, "backward");
  EXPECT_EQ(a.count, 5u);
}

LayerStats layer_named(const LayerAnalysis& a, const std::string& name) {
  for (const LayerStats& l : a.layers)
    if (l.name == name) return l;
  return LayerStats{};
}

TEST(Layers, BackwardGoesToTheModuleOpenWhenItsForwardOpRan) {
  // GIVEN modules Net(0) > fc(1), conv(2); forward ops with seq 7 (in fc),
  // 8 (in conv); backward nodes for both, fc's 9x longer
  RunBuilder rb;
  rb.run.modules = {ModuleInfo{"Net", "Net", 10, -1}, ModuleInfo{"fc", "Linear", 6, 0},
                    ModuleInfo{"conv", "Conv2d", 4, 0}};
  rb.module(0, 0, 100);
  rb.module(1, 10, 40);
  rb.module(2, 50, 90);
  rb.event("aten::linear", OpKind::kOperator, 12, 38, 7);  // peeks seq 7
  rb.event("aten::addmm", OpKind::kOperator, 15, 35, 7);   // the latest start with seq 7
  rb.event("aten::conv2d", OpKind::kOperator, 55, 85, 8);
  rb.event("AddmmBackward0", OpKind::kBackward, 200, 290, 7);
  rb.event("ConvolutionBackward0", OpKind::kBackward, 300, 310, 8);
  rb.event("AccumulateGrad", OpKind::kBackward, 320, 330, 99);  // no forward op: unattributed
  rb.finish();
  const LayerAnalysis a = analyze_layers(rb.run);
  auto find = [&](const std::string& n) { return layer_named(a, n); };
  EXPECT_EQ(find("fc").backward_ns, 90);
  EXPECT_EQ(find("conv").backward_ns, 10);
  EXPECT_EQ(find("Net").backward_ns, 100);  // blocks include their children
  EXPECT_EQ(find("fc").forward_ns, 30);
  EXPECT_EQ(find("Net").forward_ns, 100);
  EXPECT_TRUE(find("fc").leaf);
  EXPECT_FALSE(find("Net").leaf);
  EXPECT_EQ(a.backward_unattributed_ns, 10);
  EXPECT_EQ(a.layers.front().name, "Net");
}

TEST(Layers, TimeFarAboveALayersMedianCallIsAWaitNotItsWork) {
  // GIVEN Net(0) > fc(1) called in 10 steps of 100 ns: fc's forward 30 ns
  // and its node's backward 20 ns each step, but step 3's backward 250 ns
  // (a wait) and step 6's forward 80 ns (within 4 times its median call)
  RunBuilder rb;
  rb.run.modules = {ModuleInfo{"Net", "Net", 10, -1}, ModuleInfo{"fc", "Linear", 6, 0}};
  for (int i = 0; i < 10; ++i) {
    const int64_t t = 1000 * i;
    const int64_t fc_forward = i == 6 ? 80 : 30;
    rb.module(0, t, t + 100);
    rb.module(1, t + 10, t + 10 + fc_forward);
    rb.event("aten::addmm", OpKind::kOperator, t + 12, t + 8 + fc_forward, i);
    rb.event("AddmmBackward0", OpKind::kBackward, t + 200, t + 200 + (i == 3 ? 250 : 20), i);
  }
  rb.finish();
  const LayerAnalysis a = analyze_layers(rb.run);
  auto find = [&](const std::string& n) { return layer_named(a, n); };
  // THEN fc's step 3 call (30 + 250) is over 4 x its median call (50): the
  // 80 ns above 200 is a wait; step 6's call (100) is not
  EXPECT_EQ(find("fc").combined(), 10 * 50 + 50 + 230);
  EXPECT_EQ(find("fc").stalled_ns, 280 - 200);
  EXPECT_EQ(find("fc").worked(), find("fc").combined() - 80);
  // AND Net's calls (100 forward + fc's backward) are judged the same way:
  // its step 3 call (350) is under 4 x its median (120)
  EXPECT_EQ(find("Net").stalled_ns, 0);
  // AND under kMinCallsForStalls calls no call is judged
  RunBuilder few;
  few.run.modules = rb.run.modules;
  for (int i = 0; i < 4; ++i) {
    few.module(0, 1000 * i, 1000 * i + 100);
    few.module(1, 1000 * i + 10, 1000 * i + (i == 0 ? 90 : 20));
  }
  few.finish();
  for (const LayerStats& l : analyze_layers(few.run).layers) EXPECT_EQ(l.stalled_ns, 0) << l.name;
}

}  // namespace
}  // namespace torchneck
