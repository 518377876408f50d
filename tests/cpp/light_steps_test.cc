// The light steps' breakdown (analyze/light_steps.h): the split learnt from
// planted detailed steps, applied to planted light steps whose true split
// the test sets.
#include <gtest/gtest.h>

#include <vector>

#include "analyze/light_steps.h"

namespace torchneck {
namespace {

constexpr int kF = static_cast<int>(Phase::kForward);
constexpr int kO = static_cast<int>(Phase::kOther);
constexpr int kB = static_cast<int>(Phase::kBackward);

// A detailed step's joint time: its light "other" holding `forward` and
// `other` with detail, its backward scope `backward`, all backward.
JointPhases detailed(int64_t forward, int64_t other, int64_t backward = 1000) {
  JointPhases j{};
  j[kO * kNumPhases + kF] = forward;
  j[kO * kNumPhases + kO] = other;
  j[kB * kNumPhases + kB] = backward;
  return j;
}

// A light step at `start`: its backward scope, then the rest "other".
Step light(int64_t start, int64_t other, int64_t backward = 1000) {
  Step s;
  s.start_ns = start;
  s.end_ns = start + other + backward;
  s.detailed = false;
  s.breakdown.ns[kO] = other;
  s.breakdown.ns[kB] = backward;
  return s;
}

std::vector<size_t> all(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(LightSteps, AStallInOneDetailedStepSetsNoSplit) {
  // Four steps spend 80 % of "other" in forward; the fifth stalled 500 ns
  // between operators. A ratio of sums would say 4000 / 5500 = 73 %.
  const std::vector<JointPhases> joint = {detailed(800, 200), detailed(800, 200), detailed(800, 700),
                                          detailed(800, 200), detailed(800, 200)};
  const LightSplit s = learn_light_split(joint, all(joint.size()));
  EXPECT_NEAR(s.typical[kO][kF], 0.8, 1e-9);
  EXPECT_NEAR(s.typical[kO][kO], 0.2, 1e-9);
  EXPECT_NEAR(s.typical[kB][kB], 1.0, 1e-9);
}

TEST(LightSteps, EvaluationSeenOnlyInAWindowIsGivenToNoLightStep) {
  // GIVEN detailed steps whose light "other" held, besides forward, a
  // no_grad forward the detail called evaluation (a text sample) that no
  // light event marks
  constexpr int kE = static_cast<int>(Phase::kEvaluation);
  std::vector<JointPhases> joint(5, detailed(800, 100));
  for (JointPhases& j : joint) j[kO * kNumPhases + kE] = 100;
  const LightSplit s = learn_light_split(joint, all(joint.size()));
  // THEN a light step's "other" goes to forward and other, in the same
  // proportions as without it: none to evaluation
  EXPECT_EQ(s.typical[kO][kE], 0.0);
  EXPECT_EQ(s.excess[kO][kE], 0.0);
  EXPECT_NEAR(s.typical[kO][kF], 800.0 / 900.0, 1e-9);
  std::vector<Step> steps;
  for (int i = 0; i < 10; ++i) steps.push_back(light(i * 100000, 1000));
  estimate_light_steps(steps, s);
  for (const Step& st : steps) EXPECT_EQ(st.breakdown.ns[kE], 0);
}

TEST(LightSteps, ACheckpointInAWindowKeepsEveryCheckpointsTimeOther) {
  // Every 5th step also saves a checkpoint, 19 us of Python between its
  // operators, with no more backward than the others; the window held one.
  const std::vector<JointPhases> joint = {detailed(800, 200), detailed(800, 200), detailed(800, 200 + 19000),
                                          detailed(800, 200), detailed(800, 200)};
  const LightSplit s = learn_light_split(joint, all(joint.size()));
  EXPECT_NEAR(s.excess[kO][kO], 1.0, 1e-9);
  std::vector<Step> steps;
  for (int i = 0; i < 20; ++i) steps.push_back(light(i * 100000, i % 5 == 4 ? 20000 : 1000));
  EXPECT_EQ(estimate_light_steps(steps, s), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(steps[i].estimated);
    EXPECT_EQ(steps[i].breakdown.ns[kF], 800) << i;
    EXPECT_EQ(steps[i].breakdown.ns[kO], i % 5 == 4 ? 19200 : 200) << i;
    EXPECT_EQ(steps[i].breakdown.total(), steps[i].duration()) << i;
  }
}

TEST(LightSteps, WithoutAnAtypicalDetailedStepTheExcessIsSplitAsTypical) {
  // Every 4th step's forward runs slower (a loader's workers take the
  // cores), no such step in the window: the same work slower, or work no
  // window saw, look alike; the typical split is kept.
  const std::vector<JointPhases> joint = {detailed(800, 200), detailed(800, 200), detailed(800, 200)};
  const LightSplit s = learn_light_split(joint, all(joint.size()));
  EXPECT_NEAR(s.excess[kO][kF], 0.8, 1e-9);
  std::vector<Step> steps;
  for (int i = 0; i < 10; ++i) steps.push_back(light(i * 100000, i % 4 == 3 ? 6000 : 1000));
  estimate_light_steps(steps, s);
  EXPECT_EQ(steps[3].breakdown.ns[kF], 4800);
  EXPECT_EQ(steps[3].breakdown.ns[kO], 1200);
}

TEST(LightSteps, AStepThatRanTheLoopTwiceIsSplitAsTheOthers) {
  // A skipped optimizer step: every 4th step holds two iterations, twice
  // the backward (two passes) and a little over twice the rest.
  const std::vector<JointPhases> joint = {detailed(800, 200), detailed(800, 200), detailed(800, 200)};
  const LightSplit s = learn_light_split(joint, all(joint.size()));
  std::vector<Step> steps;
  for (int i = 0; i < 16; ++i) {
    steps.push_back(i % 4 == 3 ? light(i * 100000, 2100, 2000) : light(i * 100000, 1000));
    steps.back().micro_batches = i % 4 == 3 ? 2 : 1;
  }
  estimate_light_steps(steps, s);
  EXPECT_EQ(steps[3].breakdown.ns[kF], 1680);
  EXPECT_EQ(steps[3].breakdown.ns[kO], 420);
  EXPECT_EQ(steps[3].breakdown.ns[kB], 2000);
}

TEST(LightSteps, AStepWhoseOneBackwardRanSlowerHoldsTheLoopsOwnTimeOnce) {
  // bursty_loader's light steps while its workers take the cores: one
  // backward pass 7.5x its level, the forward with it, the loop's own time
  // between the model's calls ("other") as in every step. Typical split of
  // the time outside the scopes: forward 520, other 480.
  const std::vector<JointPhases> joint = {detailed(520, 480), detailed(520, 480), detailed(520, 480)};
  const LightSplit s = learn_light_split(joint, all(joint.size()));
  std::vector<Step> steps;
  for (int i = 0; i < 9; ++i) {
    steps.push_back(i == 4 ? light(i * 100000, 520 * 15 / 2 + 480, 7500) : light(i * 100000, 1000));
    steps.back().micro_batches = 1;
  }
  estimate_light_steps(steps, s);
  EXPECT_EQ(steps[4].breakdown.ns[kF], 3900);
  EXPECT_EQ(steps[4].breakdown.ns[kO], 480);
  EXPECT_EQ(steps[4].breakdown.ns[kB], 7500);
  // and its neighbours as the detailed steps split
  EXPECT_EQ(steps[3].breakdown.ns[kF], 520);
  EXPECT_EQ(steps[3].breakdown.ns[kO], 480);
}

TEST(LightSteps, ADetailedAtypicalStepTeachesWhereTheExcessGoes) {
  // One detailed step ran an extra 10 us, 90 % of it in operators (say a
  // validation batch outside any loader): light steps like it are split so.
  const std::vector<JointPhases> joint = {detailed(800, 200), detailed(800, 200), detailed(800 + 9000, 200 + 1000),
                                          detailed(800, 200)};
  const LightSplit s = learn_light_split(joint, all(joint.size()));
  EXPECT_NEAR(s.typical[kO][kF], 0.8, 1e-9);
  EXPECT_NEAR(s.excess[kO][kF], 0.9, 1e-9);
  std::vector<Step> steps;
  for (int i = 0; i < 9; ++i) steps.push_back(light(i * 100000, i == 4 ? 11000 : 1000));
  estimate_light_steps(steps, s);
  EXPECT_EQ(steps[4].breakdown.ns[kF], 800 + 9000);
  EXPECT_EQ(steps[4].breakdown.ns[kO], 200 + 1000);
}

TEST(LightSteps, TheLaunchersOwnWorkStaysOtherOutsideTheSplit) {
  const std::vector<JointPhases> joint = {detailed(800, 200)};
  const LightSplit s = learn_light_split(joint, all(joint.size()));
  std::vector<Step> steps = {light(0, 1000), light(100000, 1500), light(200000, 1000)};
  steps[1].tool_ns = 500;  // a graph watch's look, inside "other"
  estimate_light_steps(steps, s);
  EXPECT_EQ(steps[1].breakdown.ns[kF], 800);
  EXPECT_EQ(steps[1].breakdown.ns[kO], 700);
}

TEST(LightSteps, DetailedStepsKeepTheirOwnBreakdown) {
  const std::vector<JointPhases> joint = {detailed(800, 200)};
  const LightSplit s = learn_light_split(joint, all(joint.size()));
  std::vector<Step> steps = {light(0, 1000)};
  steps[0].detailed = true;
  steps[0].breakdown.ns[kO] = 100;
  steps[0].breakdown.ns[kF] = 900;
  EXPECT_EQ(estimate_light_steps(steps, s), 0u);
  EXPECT_FALSE(steps[0].estimated);
  EXPECT_EQ(steps[0].breakdown.ns[kF], 900);
}

TEST(LightSteps, WithNoDetailedStepEachLightPhaseStaysItself) {
  const LightSplit s = learn_light_split({}, {});
  for (int q = 0; q < kNumPhases; ++q) {
    EXPECT_EQ(s.typical[q][q], 1.0);
    EXPECT_EQ(s.excess[q][q], 1.0);
  }
}

}  // namespace
}  // namespace torchneck
