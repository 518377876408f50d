// run --try's measurements onto the findings (analyze/experiments.h), on
// hand-made step times whose gain is known by construction.
#include <gtest/gtest.h>

#include <string>

#include "analyze/experiments.h"

namespace torchneck {
namespace {

constexpr int64_t kMs = 1'000'000;

// 40 steps of `ms` (+-1 ms alternately).
std::vector<int64_t> steps_of(int64_t ms) {
  std::vector<int64_t> v;
  for (int i = 0; i < 40; ++i) v.push_back(ms * kMs + (i % 2 ? kMs : -kMs));
  return v;
}

Run run_with(const std::string& setting, int64_t base_ms, int64_t try_ms, const std::string& state = "measured") {
  Run run;
  Experiment e;
  e.setting = setting;
  e.state = experiment_state_from_string(state);
  e.rounds = 2;
  e.baseline_ns = steps_of(base_ms);
  e.try_ns = steps_of(try_ms);
  run.experiments.push_back(e);
  return run;
}

Diagnosis with_finding(const std::string& try_setting, std::optional<double> estimate) {
  Diagnosis d;
  Finding f = make_finding(FindingId::input_bound);
  f.severity = Severity::kHigh;
  f.title = "Input-bound";
  f.try_setting = try_setting;
  f.estimated_gain_pct = estimate;
  d.findings.push_back(f);
  return d;
}

TEST(Experiments, AMeasuredGainJoinsItsFinding) {
  // GIVEN baseline steps of 40 ms and try steps of 20 ms for num_workers=4
  const torchneck::Run run = run_with("num_workers=4", 40, 20);
  std::vector<ExperimentResult> results = analyze_experiments(run);
  Diagnosis d = with_finding("num_workers=4", 55.0);
  apply_experiments(d, results, StepAnalysis{});
  // THEN the gain is 50 %, significant, inside its interval, and the
  // finding carries it, kept at its severity
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].measured);
  EXPECT_NEAR(results[0].gain_pct, 50, 1e-9);
  EXPECT_LT(results[0].gain_ci95.low, 50);
  EXPECT_GT(results[0].gain_ci95.high, 50);
  EXPECT_TRUE(results[0].significant);
  EXPECT_EQ(results[0].finding, "input_bound");
  EXPECT_EQ(*results[0].estimated_gain_pct, 55.0);
  const Finding& f = d.findings[0];
  EXPECT_EQ(f.severity, Severity::kHigh);
  ASSERT_TRUE(f.measured_gain_pct.has_value());
  EXPECT_NEAR(*f.measured_gain_pct, 50, 1e-9);
  EXPECT_EQ(f.evidence.back().rfind("measured with --try num_workers=4: step 40.0 ms -> 20.0 ms, a gain of 50.0 %", 0), 0u)
      << f.evidence.back();
}

TEST(Experiments, NoGainOrALossDemotesTheFinding) {
  for (int64_t try_ms : {40, 50}) {
    const torchneck::Run run = run_with("threads=2", 40, try_ms);
    std::vector<ExperimentResult> results = analyze_experiments(run);
    Diagnosis d = with_finding("threads=2", std::nullopt);
    apply_experiments(d, results, StepAnalysis{});
    EXPECT_EQ(d.findings[0].severity, Severity::kLow) << try_ms;
    EXPECT_EQ(results[0].outcome, try_ms == 40 ? TryOutcome::kNoGain : TryOutcome::kSlower) << try_ms;
    EXPECT_NE(d.findings[0].evidence.back().find(try_ms == 40 ? "no gain on this machine" : "made the step slower"),
              std::string::npos)
        << d.findings[0].evidence.back();
  }
}

TEST(Experiments, AWideIntervalIsInconclusiveAndTheFindingStands) {
  // GIVEN try steps of 20 and 60 ms alternately (a loaded machine) against a
  // steady 40 ms baseline: a mean gain near 0, an interval reaching past 3 %
  torchneck::Run run = run_with("num_workers=4", 40, 40);
  std::vector<int64_t>& tried = run.experiments[0].try_ns;
  for (size_t i = 0; i < tried.size(); ++i) tried[i] = (i % 2 ? 60 : 20) * kMs;
  std::vector<ExperimentResult> results = analyze_experiments(run);
  Diagnosis d = with_finding("num_workers=4", 55.0);
  apply_experiments(d, results, StepAnalysis{});
  // THEN inconclusive: neither a gain nor none, the finding kept as it was
  ASSERT_TRUE(results[0].measured);
  EXPECT_FALSE(results[0].significant);
  EXPECT_LT(results[0].gain_ci95.low, 0);
  EXPECT_GT(results[0].gain_ci95.high, kTryNoiseFloorPct);
  EXPECT_EQ(results[0].outcome, TryOutcome::kInconclusive);
  EXPECT_EQ(d.findings[0].severity, Severity::kHigh);
  EXPECT_NE(d.findings[0].evidence.back().find("inconclusive"), std::string::npos) << d.findings[0].evidence.back();
  EXPECT_EQ(d.findings[0].evidence.back().find("demoted"), std::string::npos) << d.findings[0].evidence.back();
}

TEST(Experiments, AnUnmeasuredOrUnrelatedExperimentChangesNothing) {
  for (const auto& [setting, state] : {std::pair<std::string, std::string>{"threads=2", "overridden"},
                                      {"num_workers=8", "measured"}}) {
    const torchneck::Run run = run_with(setting, 40, 40, state);
    std::vector<ExperimentResult> results = analyze_experiments(run);
    Diagnosis d = with_finding("threads=2", std::nullopt);
    apply_experiments(d, results, StepAnalysis{});
    EXPECT_EQ(d.findings[0].severity, Severity::kHigh) << setting;
    EXPECT_FALSE(d.findings[0].measured_gain_pct.has_value()) << setting;
    EXPECT_EQ(results[0].measured, state == "measured");
  }
}

}  // namespace
}  // namespace torchneck
