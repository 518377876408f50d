// `run --try SETTING`: what each experiment measured (model Experiment:
// baseline and try runs of the script, interleaved), and what that does to
// the findings whose fix it is (docs/try.md).
#pragma once

#include <string>
#include <vector>

#include "core/bootstrap.h"
#include "analyze/diagnosis.h"
#include "model/run.h"

namespace torchneck {

// What a measurement says of its setting. kInconclusive: the interval holds 0
// but reaches past the noise floor, so a gain worth having is neither shown
// nor ruled out (a loaded machine, too few steps); the finding stands.
enum class TryOutcome { kNotMeasured, kGain, kSlower, kNoGain, kInconclusive };
const char* try_outcome_name(TryOutcome o);

struct ExperimentResult {
  const Experiment* experiment = nullptr;
  size_t baseline_steps = 0, try_steps = 0;
  double baseline_ms = 0, try_ms = 0;  // mean step
  bool measured = false;               // state "measured" with enough steps on both sides
  double gain_pct = 0;                 // step time saved: 1 - try / baseline, in %
  Interval gain_ci95;                  // of gain_pct
  bool significant = false;            // the interval excludes 0 and the gain passes kTryNoiseFloorPct
  TryOutcome outcome = TryOutcome::kNotMeasured;
  std::string finding;                 // the id of the finding whose try_setting it is, "" when none
  std::optional<double> estimated_gain_pct;  // that finding's estimate
};

// Fewer steps than this on a side: nothing measured.
inline constexpr size_t kTryMinSteps = 5;
// A gain under this is no gain: the runs alternate (baseline, try, try,
// baseline), so a steady drift of the machine cancels, but its jitter
// between runs does not (a few percent on a shared machine, docs/diff.md).
// A finding whose measured gain stays under it is demoted to low.
inline constexpr double kTryNoiseFloorPct = 3.0;

std::vector<ExperimentResult> analyze_experiments(const Run& run);

// Each measured experiment's result onto the finding whose try_setting it
// is: the measured gain and interval in its fields and evidence; a finding
// whose fix measured no gain (the interval below the floor) or a slower
// step is demoted to low, its evidence saying so; an inconclusive one keeps
// its severity, its evidence saying what would settle it. Then sorts and writes the verdict
// again (finish_diagnosis). Also fills each result's `finding`.
void apply_experiments(Diagnosis& d, std::vector<ExperimentResult>& results, const StepAnalysis& steps);

}  // namespace torchneck
