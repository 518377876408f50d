#include "analyze/experiments.h"

#include <cmath>
#include <cstdio>

namespace torchneck {
namespace {

constexpr int kResamples = 2000;
constexpr uint64_t kSeed = 20261201;

std::vector<double> as_ms(const std::vector<int64_t>& ns) {
  std::vector<double> v;
  v.reserve(ns.size());
  for (int64_t d : ns) v.push_back(static_cast<double>(d) / 1e6);
  return v;
}

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", v);
  return buf;
}

TryOutcome outcome_of(const ExperimentResult& r) {
  if (!r.measured) return TryOutcome::kNotMeasured;
  if (r.significant) return r.gain_pct > 0 ? TryOutcome::kGain : TryOutcome::kSlower;
  if (r.gain_ci95.high < kTryNoiseFloorPct) return TryOutcome::kNoGain;
  return TryOutcome::kInconclusive;
}

}  // namespace

const char* try_outcome_name(TryOutcome o) {
  switch (o) {
    case TryOutcome::kNotMeasured: return "not_measured";
    case TryOutcome::kGain: return "gain";
    case TryOutcome::kSlower: return "slower";
    case TryOutcome::kNoGain: return "no_gain";
    case TryOutcome::kInconclusive: return "inconclusive";
  }
  return "not_measured";
}

std::vector<ExperimentResult> analyze_experiments(const Run& run) {
  std::vector<ExperimentResult> out;
  for (const Experiment& e : run.experiments) {
    ExperimentResult r;
    r.experiment = &e;
    const std::vector<double> base = as_ms(e.baseline_ns), tried = as_ms(e.try_ns);
    r.baseline_steps = base.size();
    r.try_steps = tried.size();
    r.baseline_ms = mean_of(base);
    r.try_ms = mean_of(tried);
    r.measured = e.state == ExperimentState::kMeasured && base.size() >= kTryMinSteps && tried.size() >= kTryMinSteps && r.baseline_ms > 0;
    if (r.measured) {
      r.gain_pct = 100.0 * (1.0 - r.try_ms / r.baseline_ms);
      const Interval change = bootstrap_change_ci(base, tried, block_length_for(std::min(base.size(), tried.size())),
                                                  kResamples, kSeed);
      r.gain_ci95 = {-change.high, -change.low};
      r.significant = (r.gain_ci95.low > 0 || r.gain_ci95.high < 0) && std::fabs(r.gain_pct) >= kTryNoiseFloorPct;
    }
    r.outcome = outcome_of(r);
    out.push_back(r);
  }
  return out;
}

void apply_experiments(Diagnosis& d, std::vector<ExperimentResult>& results, const StepAnalysis& steps) {
  if (results.empty()) return;
  for (ExperimentResult& r : results) {
    for (Finding& f : d.findings) {
      if (f.try_setting.empty() || f.try_setting != r.experiment->setting) continue;
      r.finding = f.id;
      r.estimated_gain_pct = f.estimated_gain_pct;
      if (!r.measured) break;
      f.measured_gain_pct = r.gain_pct;
      f.measured_gain_low = r.gain_ci95.low;
      f.measured_gain_high = r.gain_ci95.high;
      const std::string measured = "measured with --try " + r.experiment->setting + ": step " +
                                   fmt_ms(static_cast<int64_t>(r.baseline_ms * 1e6)) + " -> " +
                                   fmt_ms(static_cast<int64_t>(r.try_ms * 1e6)) + ", a gain of " + pct(r.gain_pct) +
                                   " (95 % interval " + pct(r.gain_ci95.low) + " .. " + pct(r.gain_ci95.high) + ", " +
                                   std::to_string(r.baseline_steps) + " + " + std::to_string(r.try_steps) + " steps)";
      switch (r.outcome) {
        case TryOutcome::kGain: f.evidence.push_back(measured); break;
        case TryOutcome::kSlower:
          f.evidence.push_back(measured + ": the setting made the step slower on this machine, so this finding is "
                                          "demoted to low");
          f.severity = Severity::kLow;
          break;
        case TryOutcome::kNoGain:
          f.evidence.push_back(measured + ": no gain on this machine, so this finding is demoted to low");
          f.severity = Severity::kLow;
          break;
        case TryOutcome::kInconclusive:
          f.evidence.push_back(measured + ": inconclusive, the interval is too wide to show or rule out a gain; the "
                                          "finding stands as estimated (more --try-steps, or a quieter machine, "
                                          "would settle it)");
          break;
        case TryOutcome::kNotMeasured: break;
      }
      break;
    }
  }
  finish_diagnosis(d, steps);
}

}  // namespace torchneck
