// evaluation_heavy: evaluation passes inside the training loop (module calls
// no backward went through, with their own fetches: loop_spans.h) take a
// large share of the wall time.
#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

// Evaluating costs a sixth of the loop: worth a look at how often and on
// how much. Beyond 40 % the run evaluates more than it trains.
constexpr double kEvaluationShare = 0.15;
constexpr double kEvaluationHighShare = 0.40;
// Evaluating half as often (or on half the validation set) halves it.
constexpr double kAssumedSaving = 0.5;

}  // namespace

void detect_evaluation_heavy(const DiagnosisInput& in, std::vector<Finding>& out) {
  const StepAnalysis& s = in.steps;
  const double part = share(s.evaluation_ns, s.window_ns);
  if (s.evaluation.empty() || s.window_ns <= 0 || part < kEvaluationShare) return;
  Finding f = make_finding(FindingId::evaluation_heavy);
  if (part >= kEvaluationHighShare) f.severity = Severity::kHigh;
  const size_t passes = s.evaluation.size();
  f.title = "Evaluation takes " + fmt_pct(part) + " of the training loop's wall time (" + std::to_string(passes) +
            " pass" + (passes == 1 ? "" : "es") + ")";
  f.evidence.push_back(std::to_string(passes) + " evaluation passes (module calls no backward went through) took " +
                       fmt_ms(s.evaluation_ns) + " of the " + fmt_ms(s.window_ns) + " the " +
                       std::to_string(s.steps.size()) + " steps took, " +
                       fmt_ms(s.evaluation_ns / static_cast<int64_t>(passes)) + " each");
  if (passes > 1)
    f.evidence.push_back("one pass every " + std::to_string(s.steps.size() / passes) + " steps on average");
  f.recommendation = "evaluate less often or on a subset of the validation set, with a larger batch and under "
                     "torch.inference_mode(); or evaluate in a separate process";
  f.estimated_gain_pct = 100.0 * kAssumedSaving * part;
  f.gain_arithmetic = "evaluation " + fmt_pct(part) + " of the wall time x " + fmt_pct(kAssumedSaving) +
                      " (evaluating half as often)";
  f.numbers = {{"share_pct", 100.0 * part}, {"passes", static_cast<double>(passes)}};
  out.push_back(std::move(f));
}

}  // namespace torchneck
