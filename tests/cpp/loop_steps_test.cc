// Loops whose steps differ, on hand-built runs whose answer is known by
// construction: evaluation passes inside training, loader bursts, slow
// steps kept and explained, gradient accumulation, LBFGS's closure.
#include <gtest/gtest.h>

#include <string>

#include "analyze/detectors/shared_thresholds.h"
#include "analyze/diagnosis.h"
#include "analyze/layers.h"
#include "analyze/steps.h"
#include "run_builder.h"

namespace torchneck {
namespace {

using test_support::RunBuilder;

constexpr int64_t kMs = 1'000'000;
const char* kFetch = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";

// One training step at t: fetch `data` (none when 0), the model (module 0
// > fc, module 1) with an addmm of sequence number `seq`, its backward
// node, SGD.step. Returns the step's end. 10 ms of compute.
int64_t train_step(RunBuilder& rb, int64_t t, int64_t data, int64_t seq) {
  if (data > 0) rb.event(kFetch, OpKind::kUserScope, t, t + data);
  t += data;
  rb.module(0, t, t + 4 * kMs);
  rb.module(1, t + kMs, t + 3 * kMs);
  rb.event("aten::addmm", OpKind::kOperator, t + kMs, t + 3 * kMs, seq);
  rb.event("AddmmBackward0", OpKind::kBackward, t + 4 * kMs, t + 8 * kMs, seq);
  rb.event("Optimizer.step#SGD.step", OpKind::kUserScope, t + 8 * kMs, t + 10 * kMs);
  return t + 10 * kMs;
}

// An evaluation pass at t: `batches` validation fetches of 1 ms and model
// calls of 5 ms under no_grad, whose addmm peeks `seq` (the number the next
// training op takes: no node was made), then the fetch that ends the loop.
int64_t eval_pass(RunBuilder& rb, int64_t t, int batches, int64_t seq) {
  for (int b = 0; b < batches; ++b) {
    rb.event(kFetch, OpKind::kUserScope, t, t + kMs);
    t += kMs;
    rb.module(0, t, t + 5 * kMs);
    rb.module(1, t + kMs, t + 4 * kMs);
    rb.event("aten::addmm", OpKind::kOperator, t + kMs, t + 4 * kMs, seq);
    t += 5 * kMs;
  }
  rb.event(kFetch, OpKind::kUserScope, t, t + kMs);  // StopIteration
  return t + kMs;
}

RunBuilder model_run() {
  RunBuilder rb;
  rb.run.modules = {ModuleInfo{"Net", "Net", 10, -1}, ModuleInfo{"fc", "Linear", 10, 0}};
  rb.run.env.optimizers = {OptimizerFacts{"SGD", 2, false}};
  return rb;
}

// 20 training steps with 2 ms data waits, an evaluation pass of 10 batches
// after the 10th.
RunBuilder run_with_evaluation_pass() {
  RunBuilder rb = model_run();
  int64_t t = 0;
  for (int i = 0; i < 20; ++i) {
    t = train_step(rb, t, 2 * kMs, i);
    if (i == 9) t = eval_pass(rb, t, 10, i + 1);
  }
  rb.finish();
  return rb;
}

TEST(LoopSteps, AnEvaluationPassIsItsOwnPhaseAndNoLayerCostOfTraining) {
  // GIVEN 20 training steps with 2 ms data waits; after step 10 an
  // evaluation pass of 10 batches (60 ms + the final fetch: 61 ms)
  RunBuilder rb = run_with_evaluation_pass();
  const StepAnalysis a = analyze_steps(rb.run);
  // THEN the steps are the 20 optimizer steps, and the pass is found whole
  EXPECT_EQ(a.source, "optimizer");
  ASSERT_EQ(a.count, 20u);
  ASSERT_EQ(a.evaluation.size(), 1u);
  EXPECT_EQ(a.evaluation[0].second - a.evaluation[0].first, 61 * kMs);
  EXPECT_EQ(a.evaluation_ns, 61 * kMs);
  // it lands in step 11, whose training fetch stays data
  EXPECT_EQ(a.steps[10].breakdown[Phase::kEvaluation], 61 * kMs);
  EXPECT_EQ(a.steps[10].breakdown[Phase::kData], 2 * kMs);
  EXPECT_EQ(a.steps[10].slow, SlowKind::kEvaluation);
  // the statistics keep it: 19 steady steps of 12 ms, one 61 ms longer
  EXPECT_EQ(a.steady_count, 19u);
  EXPECT_EQ(a.step_ns, (19 * 12 + 61) * kMs / 19);
  EXPECT_EQ(a.typical_ns, 12 * kMs);
  // the layers count the pass's calls apart
  const LayerAnalysis l = analyze_layers(rb.run, a.evaluation);
  for (const LayerStats& x : l.layers) {
    EXPECT_EQ(x.calls, 20u) << x.name;
    EXPECT_EQ(x.eval_calls, 10u) << x.name;
  }
  // and the diagnosis: evaluation_heavy, no gain of 100 % or more
  const Diagnosis d = diagnose(diagnosis_input(rb.run, a, l));
  bool eval = false;
  for (const Finding& f : d.findings) {
    eval = eval || f.id == "evaluation_heavy";
    if (f.estimated_gain_pct) {
      EXPECT_LT(*f.estimated_gain_pct, 100.0) << f.id;
    }
  }
  EXPECT_TRUE(eval);
}

// A training step at t: a 2 ms fetch, a 3 ms no-grad call of module 2
// (its addmm peeks `seq`, which the model's addmm then takes), then
// train_step's 10 ms of model, backward and SGD.step. Returns its end.
int64_t step_with_a_network_it_does_not_train(RunBuilder& rb, int64_t t, int64_t seq) {
  rb.event(kFetch, OpKind::kUserScope, t, t + 2 * kMs);
  t += 2 * kMs;
  rb.module(2, t, t + 3 * kMs);
  rb.event("aten::addmm", OpKind::kOperator, t, t + 3 * kMs, seq);
  return train_step(rb, t + 3 * kMs, 0, seq);
}

TEST(LoopSteps, ANetworkTheLoopDoesNotTrainCalledEveryIterationIsForwardNotEvaluation) {
  for (const int64_t trainable : {int64_t{0}, int64_t{50}}) {
    // GIVEN 20 steps that each call a root network without backward: frozen
    // (no parameter requires grad: a loss network), or never in a training
    // call (a teacher under no_grad)
    RunBuilder rb = model_run();
    rb.run.modules.push_back(ModuleInfo{"vgg", "Vgg16", 50, -1});
    rb.run.modules.back().trainable_params = trainable;
    int64_t t = 0;
    for (int i = 0; i < 20; ++i) t = step_with_a_network_it_does_not_train(rb, t, i);
    rb.finish();
    const StepAnalysis a = analyze_steps(rb.run);
    // THEN its calls are each step's forward, named (over the 19 steps
    // after warm-up), and no evaluation
    ASSERT_EQ(a.count, 20u);
    EXPECT_TRUE(a.evaluation.empty()) << trainable;
    EXPECT_EQ(a.steps[5].breakdown[Phase::kEvaluation], 0);
    EXPECT_EQ(a.steps[5].breakdown[Phase::kForward], 7 * kMs);
    ASSERT_EQ(a.frozen.size(), 1u);
    EXPECT_EQ(a.frozen[0].name, "vgg");
    EXPECT_EQ(a.frozen[0].calls, 19u);
    EXPECT_EQ(a.frozen[0].ns_per_step, 3 * kMs);
  }
}

TEST(LoopSteps, AFrozenCopyEvaluatedOnceInAWhileIsEvaluation) {
  // GIVEN 20 training steps, and after the 10th a frozen copy of the model
  // (an EMA model) evaluated on 10 batches
  RunBuilder rb = model_run();
  rb.run.modules.push_back(ModuleInfo{"ema", "Net", 10, -1});
  rb.run.modules.back().trainable_params = 0;
  int64_t t = 0;
  for (int i = 0; i < 20; ++i) {
    t = train_step(rb, t, 2 * kMs, i);
    if (i == 9) {
      for (int b = 0; b < 10; ++b) {
        rb.event(kFetch, OpKind::kUserScope, t, t + kMs);
        rb.module(2, t + kMs, t + 6 * kMs);
        rb.event("aten::addmm", OpKind::kOperator, t + kMs, t + 6 * kMs, i + 1);
        t += 6 * kMs;
      }
      rb.event(kFetch, OpKind::kUserScope, t, t + kMs);
      t += kMs;
    }
  }
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  // THEN it is one evaluation pass, and no frozen network of the steps
  ASSERT_EQ(a.count, 20u);
  ASSERT_EQ(a.evaluation.size(), 1u);
  EXPECT_EQ(a.evaluation_ns, 61 * kMs);
  EXPECT_TRUE(a.frozen.empty());
}

TEST(LoopSteps, ATransformModuleInsideTheFetchIsDataNotEvaluation) {
  // GIVEN 20 training steps whose 6 ms fetches each call a transform
  // module (no backward through it: torchvision's transforms, num_workers=0)
  // doing 5 ms of operators
  RunBuilder rb = model_run();
  rb.run.modules.push_back(ModuleInfo{"Normalize", "Normalize", 0, -1});
  int64_t t = 0;
  for (int i = 0; i < 20; ++i) {
    rb.module(2, t + kMs / 2, t + 11 * kMs / 2);
    for (int k = 0; k < 50; ++k)
      rb.event("aten::sub", OpKind::kOperator, t + kMs / 2 + k * kMs / 10, t + kMs / 2 + (k + 1) * kMs / 10, 1000 + 50 * i + k);
    t = train_step(rb, t, 6 * kMs, i);
  }
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  // THEN the fetch is data, there is no evaluation pass, and the
  // transform's operators are not the step's compute
  ASSERT_EQ(a.count, 20u);
  EXPECT_TRUE(a.evaluation.empty());
  EXPECT_EQ(a.evaluation_ns, 0);
  EXPECT_EQ(a.steps[5].breakdown[Phase::kData], 6 * kMs);
  EXPECT_EQ(a.steps[5].ops, 1u);
  // and the transform is no layer of the model
  const LayerAnalysis l = analyze_layers(rb.run, a.evaluation);
  for (const LayerStats& x : l.layers) EXPECT_NE(x.name, "Normalize");
}

TEST(LoopSteps, AnEarlySlowStepOfADriftIsNoEvaluationStep) {
  // GIVEN 60 steps whose data wait grows 1 ms a step (steps of 10 -> 69
  // ms), and step 8 waiting 26 ms: over twice its neighbours, shorter than
  // the run's median step, with no evaluation in it
  RunBuilder rb = model_run();
  int64_t t = 0;
  for (int i = 0; i < 60; ++i) t = train_step(rb, t, (i == 8 ? 26 : i) * kMs, i);
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  ASSERT_EQ(a.count, 60u);
  // THEN it is slow, and not an evaluation step
  EXPECT_NE(a.steps[8].slow, SlowKind::kNone);
  EXPECT_NE(a.steps[8].slow, SlowKind::kEvaluation);
  for (const SlowGroup& g : a.slow) EXPECT_NE(g.kind, SlowKind::kEvaluation);
}

TEST(LoopSteps, ValidationFetchesStartNoStepWithoutAnOptimizer) {
  // GIVEN a manual-update loop (no optimizer: steps from DataLoader fetches)
  // with an evaluation pass of 4 batches after its 5th step
  RunBuilder rb;
  rb.run.modules = {ModuleInfo{"Net", "Net", 10, -1}, ModuleInfo{"fc", "Linear", 10, 0}};
  int64_t t = 0;
  for (int i = 0; i < 10; ++i) {
    t = train_step(rb, t, kMs, i);
    if (i == 4) t = eval_pass(rb, t, 4, i + 1);
  }
  rb.run.timeline.erase(std::remove_if(rb.run.timeline.begin(), rb.run.timeline.end(),
                                       [&](const OpEvent& e) { return rb.run.strings[e.name_id] == "Optimizer.step#SGD.step"; }),
                        rb.run.timeline.end());
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  EXPECT_EQ(a.source, "dataloader");
  EXPECT_EQ(a.count, 10u);
  EXPECT_EQ(a.evaluation.size(), 1u);
}

TEST(LoopSteps, LoaderBurstsAreKeptAndNamedPeriodic) {
  // GIVEN 2 workers: every other step waits 100 ms for its batch, the
  // others 1 ms; 10 ms of compute each
  RunBuilder rb = model_run();
  int64_t t = 0;
  int64_t data = 0, total = 0;
  for (int i = 0; i < 21; ++i) {
    const int64_t wait = i % 2 == 0 ? 100 * kMs : kMs;
    const int64_t start = t;
    t = train_step(rb, t, wait, i);
    if (i > 0) {
      data += wait;
      total += t - start;
    }
  }
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  // THEN no slow step is dropped: the data share is the run's
  EXPECT_EQ(a.excluded, 1u);
  EXPECT_NEAR(share(a.breakdown[Phase::kData], a.step_ns), share(data, total), 1e-6);
  // and the slow steps are one periodic group of period 2, in data
  ASSERT_EQ(a.slow.size(), 1u);
  EXPECT_EQ(a.slow[0].kind, SlowKind::kPeriodic);
  EXPECT_EQ(a.slow[0].period, 2);
  EXPECT_EQ(a.slow[0].phase, Phase::kData);
  EXPECT_EQ(a.slow[0].steps.size(), 10u);
  EXPECT_EQ(a.typical_ns, 11 * kMs);
}

TEST(LoopSteps, ASlowStepAfterAFastOneIsNoWarmup) {
  // GIVEN step 0 slow (start), step 1 fast, step 2 slow (a burst), then fast
  RunBuilder rb = model_run();
  int64_t t = 0;
  for (int i = 0; i < 12; ++i) t = train_step(rb, t, i == 0 || i == 2 ? 50 * kMs : kMs, i);
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  EXPECT_FALSE(a.steps[0].steady);
  EXPECT_TRUE(a.steps[2].steady);
  EXPECT_EQ(a.steps[2].slow, SlowKind::kOneOff);
  EXPECT_EQ(a.excluded, 1u);
}

TEST(LoopSteps, GradientAccumulationShowsItsMicroBatches) {
  // GIVEN 6 optimizer steps of 4 micro-batches (fetch, model, backward) each
  RunBuilder rb = model_run();
  int64_t t = 0, seq = 0;
  for (int i = 0; i < 6; ++i) {
    for (int m = 0; m < 4; ++m) {
      rb.event(kFetch, OpKind::kUserScope, t, t + kMs);
      rb.module(0, t + kMs, t + 3 * kMs);
      rb.event("aten::addmm", OpKind::kOperator, t + kMs, t + 3 * kMs, seq);
      rb.event("AddmmBackward0", OpKind::kBackward, t + 3 * kMs, t + 5 * kMs, seq++);
      t += 5 * kMs;
    }
    rb.event("Optimizer.step#SGD.step", OpKind::kUserScope, t, t + kMs);
    t += kMs;
  }
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  EXPECT_EQ(a.count, 6u);
  EXPECT_EQ(a.micro_batches_per_step, 4);
  EXPECT_EQ(a.steps[3].micro_batches, 4);
  EXPECT_TRUE(a.evaluation.empty());
  // 4 x (1 data + 2 forward + 2 backward) + 1 optimizer
  EXPECT_EQ(a.steps[3].breakdown[Phase::kData], 4 * kMs);
  EXPECT_EQ(a.steps[3].breakdown[Phase::kForward], 8 * kMs);
  EXPECT_EQ(a.steps[3].breakdown[Phase::kBackward], 8 * kMs);
  EXPECT_EQ(a.steps[3].breakdown[Phase::kOptimizer], kMs);
}

TEST(LoopSteps, LbfgsClosureIsForwardAndBackwardInsideTheStep) {
  // GIVEN optimizer.step(closure): the step [t, t+20) calls the model twice
  // (closure re-evaluations), each 3 ms forward + 4 ms backward
  RunBuilder rb = model_run();
  int64_t t = 0, seq = 0;
  for (int i = 0; i < 5; ++i) {
    rb.event(kFetch, OpKind::kUserScope, t, t + 2 * kMs);
    t += 2 * kMs;
    rb.event("Optimizer.step#LBFGS.step", OpKind::kUserScope, t, t + 20 * kMs);
    for (int c = 0; c < 2; ++c) {
      const int64_t u = t + kMs + c * 8 * kMs;
      rb.module(0, u, u + 3 * kMs);
      rb.event("aten::addmm", OpKind::kOperator, u, u + 3 * kMs, seq);
      rb.event("AddmmBackward0", OpKind::kBackward, u + 3 * kMs, u + 7 * kMs, seq++);
    }
    t += 20 * kMs;
  }
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  ASSERT_EQ(a.count, 5u);
  const StepBreakdown& b = a.steps[2].breakdown;
  EXPECT_EQ(b[Phase::kData], 2 * kMs);
  EXPECT_EQ(b[Phase::kForward], 6 * kMs);
  EXPECT_EQ(b[Phase::kBackward], 8 * kMs);
  EXPECT_EQ(b[Phase::kOptimizer], 6 * kMs);
  EXPECT_TRUE(a.evaluation.empty());
}

TEST(LoopSteps, AWindowFullBeforeTheFirstOptimizerStepStillCountsTheRunsSteps) {
  // GIVEN an LBFGS run whose timeline window filled inside its first
  // optimizer.step (closures of a million operators): the window holds
  // backward passes and no Optimizer.step end, the aggregates 4 steps
  RunBuilder rb = model_run();
  for (int i = 0; i < 6; ++i) {
    rb.event("aten::addmm", OpKind::kOperator, i * 10 * kMs, i * 10 * kMs + 3 * kMs, i);
    rb.event("AddmmBackward0", OpKind::kBackward, i * 10 * kMs + 3 * kMs, i * 10 * kMs + 7 * kMs, i);
  }
  OpStats step;
  step.name = "Optimizer.step#LBFGS.step";
  step.kind = OpKind::kUserScope;
  step.calls = 4;
  step.total_ns = 4 * 600 * kMs;  // 20 closures of ~30 ms inside each
  rb.run.ops.push_back(step);
  rb.run.dropped_events = 1'000'000;
  rb.finish();
  const StepAnalysis a = analyze_steps(rb.run);
  // THEN the window's spans are backward passes, the run's steps 4, each
  // 600 ms inside optimizer.step, not a span's 10 ms
  EXPECT_EQ(a.source, "backward");
  EXPECT_EQ(a.count_source, "optimizer");
  EXPECT_EQ(a.count, 4u);
  EXPECT_EQ(a.counted_step_ns, 600 * kMs);
  EXPECT_LT(a.step_ns, 20 * kMs);
}

TEST(LoopSteps, TooFewStepsDecideNothing) {
  // GIVEN a run of 2 steps after warm-up that wait for data 80 % of the time
  DiagnosisInput in;
  in.env.cpu_cores = 2;
  in.steps.source = "optimizer";
  in.steps.steps.resize(3);
  in.steps.steady_count = 2;
  in.steps.step_ns = 100 * kMs;
  in.steps.breakdown.ns[static_cast<int>(Phase::kData)] = 80 * kMs;
  in.steps.breakdown.ns[static_cast<int>(Phase::kForward)] = 20 * kMs;
  const Diagnosis d = diagnose(in);
  // THEN input_bound is there, but low, and the verdict says why
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings.front().id, "input_bound");
  EXPECT_EQ(d.findings.front().severity, Severity::kLow);
  EXPECT_EQ(d.findings.front().confidence, "low");
  EXPECT_EQ(d.verdict.rfind("Undecided: only 2 step(s)", 0), 0u) << d.verdict;
  // AND with 30 steady steps of little spread it is high, with high confidence
  in.steps.steady_count = 30;
  in.steps.mean_error = 0.01;
  const Diagnosis e = diagnose(in);
  EXPECT_EQ(e.findings.front().severity, Severity::kHigh);
  EXPECT_EQ(e.findings.front().confidence, "high");
  EXPECT_EQ(e.verdict.rfind("Input-bound", 0), 0u) << e.verdict;
}

TEST(LoopSteps, StepsGrowingSlowerAreADriftNotSlowSteps) {
  // GIVEN 60 steps whose data wait grows 0.5 ms a step (the last ~3x the
  // first), every 10th 60 ms longer (a checkpoint), and the launcher's
  // sight of `loss`'s graph rebuilt larger every step
  RunBuilder rb = model_run();
  int64_t t = 0;
  for (int i = 0; i < 60; ++i)
    t = train_step(rb, t, kMs + i * kMs / 2 + (i > 0 && i % 10 == 0 ? 60 * kMs : 0), i);
  rb.finish();
  rb.run.growing_graphs = {{"loss", "main", "", 0, "", 47, 407, 20000, 2, 32}};
  rb.run.growing_graphs[0].kept = false;
  const StepAnalysis a = analyze_steps(rb.run);
  // THEN only the checkpoint steps are slow (the level is local: the late
  // steps, all over twice the early ones, are typical), one periodic group
  ASSERT_EQ(a.slow.size(), 1u);
  EXPECT_EQ(a.slow[0].kind, SlowKind::kPeriodic);
  EXPECT_EQ(a.slow[0].period, 10);
  EXPECT_EQ(a.slow[0].steps.size(), 5u);
  // AND the drift is step_time_drift, whose evidence names the rebuilt graph
  DiagnosisInput in;
  in.steps = a;
  in.growing_graphs = rb.run.growing_graphs;
  const Diagnosis d = diagnose(in);
  const Finding* drift = nullptr;
  for (const Finding& f : d.findings)
    if (f.id == "step_time_drift") drift = &f;
  ASSERT_NE(drift, nullptr);
  bool named = false;
  for (const std::string& e : drift->evidence)
    named = named || e.find("`loss` (a local of main()) is built anew every step, and larger every time: 47 nodes") !=
                         std::string::npos;
  EXPECT_TRUE(named);
  EXPECT_NE(drift->recommendation.find("`loss` over something that grows every step"), std::string::npos);
}

// trace.json's phase track sweeps only the steps it shows: the segments of
// the first k steps are the whole run's, the same pieces (an evaluation
// pass inside step 11 included), and per step they sum to its breakdown.
TEST(LoopSteps, PhaseSegmentsOfTheFirstStepsAreTheWholeRunsFirstPieces) {
  RunBuilder rb = run_with_evaluation_pass();
  const StepAnalysis a = analyze_steps(rb.run);
  const std::vector<PhaseSegment> all = phase_segments(rb.run, a);
  ASSERT_FALSE(all.empty());
  for (size_t k : {size_t{1}, size_t{5}, size_t{11}, size_t{20}, size_t{100}}) {
    std::vector<PhaseSegment> want;
    for (const PhaseSegment& s : all)
      if (s.step < k) want.push_back(s);
    const std::vector<PhaseSegment> got = phase_segments(rb.run, a, k);
    ASSERT_EQ(got.size(), want.size()) << k;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].step, want[i].step);
      EXPECT_EQ(got[i].start_ns, want[i].start_ns);
      EXPECT_EQ(got[i].end_ns, want[i].end_ns);
      EXPECT_EQ(got[i].phase, want[i].phase);
    }
  }
  EXPECT_TRUE(phase_segments(rb.run, a, 0).empty());
  int64_t eval_ns = 0;
  for (const PhaseSegment& s : phase_segments(rb.run, a, 11))
    if (s.step == 10 && s.phase == Phase::kEvaluation) eval_ns += s.end_ns - s.start_ns;
  EXPECT_EQ(eval_ns, a.steps[10].breakdown[Phase::kEvaluation]);
}

TEST(LoopSteps, TheLoopsWaitForACpuIsTheLoopsNotTheStartUps) {
  // GIVEN a run whose main thread waited for a CPU 300 ms of its 1 s, all
  // but 2 ms of it before the loop (imports, workers starting), and step
  // clocks at the loop's first and last boundaries, 240 ms apart
  RunBuilder rb = run_with_evaluation_pass();
  rb.run.run.wall_s = 1.0;
  rb.run.run.main_thread_cpu_s = 0.5;
  rb.run.run.main_thread_runqueue_s = 0.3;
  const StepAnalysis a = analyze_steps(rb.run);
  const LayerAnalysis l = analyze_layers(rb.run, a.evaluation);
  // THEN without the clocks the run's share stands in for the loop's
  EXPECT_DOUBLE_EQ(diagnosis_input(rb.run, a, l).main_runqueue_fraction, 0.3);
  // AND with them it is the loop's: 2 ms of 240
  rb.run.step_clocks = {StepClock{10 * kMs, 100 * kMs, 290 * kMs, rb.run.main_thread},
                        StepClock{250 * kMs, 300 * kMs, 292 * kMs, rb.run.main_thread}};
  EXPECT_NEAR(diagnosis_input(rb.run, a, l).main_runqueue_fraction, 2.0 / 240, 1e-9);
}

TEST(LoopSteps, ALoaderThatSleepsOnABusyHostStillWaits) {
  // GIVEN fetches of 10 ms in all, 1 ms of it on a CPU and 6 ms runnable but
  // waiting for one (a sleeping loader, woken onto busy cores)
  RunBuilder rb = run_with_evaluation_pass();
  rb.run.data_wait_ns = 10 * kMs;
  rb.run.data_wait_cpu_ns = 1 * kMs;
  rb.run.data_wait_runqueue_ns = 6 * kMs;
  const StepAnalysis a = analyze_steps(rb.run);
  const LayerAnalysis l = analyze_layers(rb.run, a.evaluation);
  // THEN its loading computes a quarter of the time it was not waiting for a
  // core: it waits, whatever the host's load
  const DiagnosisInput in = diagnosis_input(rb.run, a, l);
  EXPECT_DOUBLE_EQ(in.data_wait_cpu_fraction, 0.25);
  EXPECT_LT(loading_cpu_fraction(in), thresholds::kLoadingWaitsBelowCpu);
  // AND a loader that computes through the same waits is computing
  rb.run.data_wait_cpu_ns = 4 * kMs;
  EXPECT_DOUBLE_EQ(diagnosis_input(rb.run, a, l).data_wait_cpu_fraction, 1.0);
}

}  // namespace
}  // namespace torchneck
