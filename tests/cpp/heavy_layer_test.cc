// heavy_layer: a leaf layer that dominates the model fires when the layer
// itself costs enough of the step, whatever the rest of the step is (an
// input-bound step of a heavy model has a heavy layer too, the seed's case
// study); not when the model is a small part of the step. Inputs are
// hand-built: a model of one heavy and four light leaves, and a step split
// into data and the model's forward + backward.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

constexpr int64_t kMs = 1'000'000;

LayerStats layer(const std::string& name, int depth, bool leaf, int64_t fwd_ms, int64_t bwd_ms, int64_t params) {
  LayerStats l;
  l.name = name;
  l.type = depth == 0 ? "Net" : "Linear";
  l.depth = depth;
  l.leaf = leaf;
  l.calls = 40;
  l.forward_ns = fwd_ms * kMs;
  l.backward_ns = bwd_ms * kMs;
  l.params = params;
  return l;
}

// A 100 ms step: DATA_MS waiting for the loader, the rest the model's
// forward and backward (half each), of which fc takes FC_SHARE and four
// convs the rest in equal parts (over 40 steps).
DiagnosisInput step_of(int64_t data_ms, double fc_share) {
  DiagnosisInput in;
  in.env.cpu_cores = 2;
  in.env.torch_threads = 2;
  StepAnalysis& s = in.steps;
  s.steps.resize(41);
  s.step_ns = 100 * kMs;
  const int64_t model_ms = 100 - data_ms;
  s.breakdown.ns[static_cast<int>(Phase::kData)] = data_ms * kMs;
  s.breakdown.ns[static_cast<int>(Phase::kForward)] = model_ms * kMs / 2;
  s.breakdown.ns[static_cast<int>(Phase::kBackward)] = model_ms * kMs - model_ms * kMs / 2;
  const auto fc = static_cast<int64_t>(fc_share * static_cast<double>(model_ms) * 40 / 2);
  const int64_t all = model_ms * 40 / 2;
  in.layers = {layer("Net", 0, false, all, all, 2'100'000), layer("fc", 1, true, fc, fc, 2'097'664)};
  in.layers[1].config = "in_features=4096, out_features=512, bias=True";
  for (int i = 0; i < 4; ++i)
    in.layers.push_back(layer("conv" + std::to_string(i), 1, true, (all - fc) / 4, (all - fc) / 4, 580));
  return in;
}

const Finding* heavy(const DiagnosisInput& in) {
  static std::vector<Finding> fs;
  fs = run_detectors(in, Evidence::kCpu);
  for (const Finding& f : fs)
    if (f.id == "heavy_layer") return &f;
  return nullptr;
}

TEST(HeavyLayer, FoundInAnInputBoundStepWhenTheLayerItselfCostsEnough) {
  // GIVEN the seed's case study on a loaded machine (as CI saw it): the
  // loader (in the main process) waits 61 % of the step, fc is 84 % of the
  // model's 39 %
  const Finding* f = heavy(step_of(61, 0.84));
  // THEN fc is named, as 84 % of the model, with the gain of halving its
  // width: half its multiply-adds, half its 32.8 %
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("Layer fc"), std::string::npos) << f->title;
  EXPECT_NE(f->title.find("84.0 %"), std::string::npos) << f->title;
  ASSERT_TRUE(f->estimated_gain_pct.has_value());
  EXPECT_NEAR(*f->estimated_gain_pct, 16.4, 0.1);
  EXPECT_FALSE(f->gain_is_upper_bound);
  EXPECT_NE(f->recommendation.find("Linear(4096, 512) -> Linear(4096, 256)"), std::string::npos) << f->recommendation;
  EXPECT_NE(f->gain_arithmetic.find("2.10 M -> 1.05 M multiply-adds"), std::string::npos) << f->gain_arithmetic;
  // AND it is medium: high needs the model to be half the step
  EXPECT_EQ(f->severity, Severity::kMedium);
  EXPECT_EQ(heavy(step_of(40, 0.84))->severity, Severity::kHigh);
}

TEST(HeavyLayer, NotFoundWhenTheLayerIsASmallPartOfTheStep) {
  // GIVEN a small model in an input-bound step: 10 % of the step, fc 84 %
  // of it (8.4 % of the step)
  EXPECT_EQ(heavy(step_of(90, 0.84)), nullptr);
  // AND a model of 60 % of the step whose heaviest leaf is 25 % of it
  EXPECT_EQ(heavy(step_of(40, 0.25)), nullptr);
  // AND about the bar of 16 %: fc 40 % of a model of 41 % of the step
  // (16.4 %) is found, 40 % of 35 % (14 %) is not
  EXPECT_NE(heavy(step_of(59, 0.40)), nullptr);
  EXPECT_EQ(heavy(step_of(65, 0.40)), nullptr);
}

TEST(HeavyLayer, OnContendedCoresALayerFarAboveItsTwinsIsTheWaitNotItsWork) {
  // GIVEN four equal convs (580 parameters each) of which one took 3 times
  // the others, and fc small: the heaviest leaf is that conv
  DiagnosisInput in = step_of(20, 0.05);
  in.layers[2].forward_ns *= 3;
  in.layers[2].backward_ns *= 3;
  // WHEN the loop waited for a CPU a third of the run THEN it is named at
  // low severity, saying its twins' time
  in.main_runqueue_fraction = 0.33;
  const Finding* f = heavy(in);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("Layer conv0"), std::string::npos) << f->title;
  EXPECT_EQ(f->severity, Severity::kLow);
  bool said = false;
  for (const std::string& e : f->evidence) said = said || e.find("layers of its type and size took") != std::string::npos;
  EXPECT_TRUE(said);
  // AND on a quiet host the same times keep their severity
  in.main_runqueue_fraction = 0.0;
  EXPECT_NE(heavy(in)->severity, Severity::kLow);
}

// Adds a wait of WAIT_MS in a few of layer I's calls, which its root's
// calls held too, as LayerSweep records it (LayerStats::stalled_ns).
void stall(DiagnosisInput& in, size_t i, int64_t wait_ms) {
  for (LayerStats* l : {&in.layers[0], &in.layers[i]}) {
    l->forward_ns += wait_ms * kMs / 2;
    l->backward_ns += wait_ms * kMs / 2;
    l->stalled_ns += wait_ms * kMs;
  }
}

TEST(HeavyLayer, AWaitInAFewCallsOfALayerIsNotItsWork) {
  // GIVEN four equal convs (760 ms each of a 3200 ms model) of which conv1
  // held a 2000 ms wait in a few calls, on a quiet host: by its time it is
  // 53 % of the model
  DiagnosisInput in = step_of(20, 0.05);
  stall(in, 3, 2000);
  ASSERT_EQ(in.layers[3].name, "conv1");
  // THEN no layer is named: by its work each conv is a quarter of it
  EXPECT_EQ(heavy(in), nullptr);
  // AND the same time spread over every call (no stalls found) is its work
  for (LayerStats& l : in.layers) l.stalled_ns = 0;
  const Finding* f = heavy(in);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("Layer conv1"), std::string::npos) << f->title;
}

TEST(HeavyLayer, AHeavyLayerThatAlsoWaitedIsNamedByItsWorkAndSaysSo) {
  // GIVEN the case study's fc (84 % of the model) with a 500 ms wait
  DiagnosisInput in = step_of(61, 0.84);
  stall(in, 1, 500);
  // THEN it is named at its work's share, the wait left out and said
  const Finding* f = heavy(in);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->title.find("84.0 %"), std::string::npos) << f->title;
  bool said = false;
  for (const std::string& e : f->evidence) said = said || e.find("500 ms of that in calls over 4 times its median") != std::string::npos;
  EXPECT_TRUE(said) << f->evidence.front();
}

// fc's share of the step in step_of(61, 0.84): 84 % of the model's 39 %.
constexpr double kFcStepPct = 0.84 * 39.0;

TEST(HeavyLayer, AnOutputLayerIsNarrowedFromItsInputNotItsOutputs) {
  // GIVEN fc the model's output layer, 784 outputs (an autoencoder's pixels)
  DiagnosisInput in = step_of(61, 0.84);
  in.layers[1].config = "in_features=400, out_features=784, bias=True";
  in.layers[1].output_layer = true;
  const Finding* f = heavy(in);
  ASSERT_NE(f, nullptr);
  // THEN the advice keeps its outputs and halves what feeds it: half its
  // multiply-adds
  EXPECT_NE(f->recommendation.find("784 outputs are what the task asks"), std::string::npos) << f->recommendation;
  EXPECT_EQ(f->recommendation.find("halve fc's width"), std::string::npos) << f->recommendation;
  EXPECT_NEAR(*f->estimated_gain_pct, kFcStepPct / 2, 0.1);
}

TEST(HeavyLayer, AVocabularyProjectionGetsItsOwnAdviceAndOnlyAnUpperBound) {
  // GIVEN fc the output layer onto the vocabulary an embedding holds
  DiagnosisInput in = step_of(61, 0.84);
  in.layers[1].config = "in_features=768, out_features=50257, bias=False";
  in.layers[1].output_layer = true;
  LayerStats wte = layer("wte", 1, true, 1, 1, 50257 * 768);
  wte.type = "Embedding";
  wte.config = "50257, 768";
  in.layers.push_back(wte);
  const Finding* f = heavy(in);
  ASSERT_NE(f, nullptr);
  // THEN it is named as such, and what its change saves depends on the data:
  // the gain is the layer's whole share, as an upper bound
  EXPECT_NE(f->recommendation.find("vocabulary projection (50257 outputs, as wte's rows)"), std::string::npos)
      << f->recommendation;
  EXPECT_TRUE(f->gain_is_upper_bound);
  EXPECT_NEAR(*f->estimated_gain_pct, kFcStepPct, 0.1);
}

TEST(HeavyLayer, ARecurrentLayersGainIsItsMultiplyAddsAtHalfTheHiddenSize) {
  // GIVEN the heavy layer a two-layer LSTM, input 64, hidden 256
  DiagnosisInput in = step_of(61, 0.84);
  in.layers[1].type = "LSTM";
  in.layers[1].config = "64, 256, num_layers=2";
  const Finding* f = heavy(in);
  ASSERT_NE(f, nullptr);
  // THEN halving its hidden size removes, per time step and gate,
  // 256 x (64 + 256) + 256 x (256 + 256) = 212,992 multiply-adds down to
  // 128 x (64 + 128) + 128 x (128 + 128) = 57,344
  const double saving = 1.0 - 57344.0 / 212992.0;
  EXPECT_NE(f->recommendation.find("hidden_size, 256 -> 128"), std::string::npos) << f->recommendation;
  EXPECT_NEAR(*f->estimated_gain_pct, kFcStepPct * saving, 0.1);
  EXPECT_FALSE(f->gain_is_upper_bound);
}

TEST(HeavyLayer, AConvHalvesItsOutputChannelsAndNamesTheSeparablePair) {
  DiagnosisInput in = step_of(61, 0.84);
  in.layers[1].type = "Conv2d";
  in.layers[1].config = "64, 128, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)";
  const Finding* f = heavy(in);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->recommendation.find("output channels, 128 -> 64"), std::string::npos) << f->recommendation;
  // a depthwise-separable pair: (9 x 64 + 64 x 128) / (9 x 64 x 128) of the
  // multiply-adds, 88 % fewer
  EXPECT_NE(f->recommendation.find("88.1 % fewer multiply-adds"), std::string::npos) << f->recommendation;
  EXPECT_NEAR(*f->estimated_gain_pct, kFcStepPct / 2, 0.1);
}

TEST(HeavyLayer, ALayerOfUnknownShapeGetsAnUpperBoundNotAnAssumedSaving) {
  DiagnosisInput in = step_of(61, 0.84);
  in.layers[1].config.clear();
  const Finding* f = heavy(in);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->gain_is_upper_bound);
  EXPECT_NEAR(*f->estimated_gain_pct, kFcStepPct, 0.1);
}

}  // namespace
}  // namespace torchneck
