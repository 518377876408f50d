#include "report/experiments_report.h"

#include "report/appendf.h"

namespace torchneck {

void write_experiments_json(JsonWriter& w, const std::vector<ExperimentResult>& results) {
  w.key("experiments").begin_array();
  for (const ExperimentResult& r : results) {
    const Experiment& e = *r.experiment;
    w.begin_object();
    w.field("setting", e.setting);
    w.field("state", to_string(e.state));
    w.field("applied", e.applied);
    w.field("note", e.note);
    w.field("rounds", e.rounds);
    w.field("warmup_steps", e.warmup_steps);
    w.key("steps").begin_object();
    w.field("baseline", static_cast<uint64_t>(r.baseline_steps));
    w.field("try", static_cast<uint64_t>(r.try_steps));
    w.end_object();
    w.field("baseline_ms", r.baseline_ms);
    w.field("try_ms", r.try_ms);
    w.key("measured_gain_pct");
    r.measured ? w.value(r.gain_pct) : w.null();
    w.key("ci95_pct");
    if (r.measured) w.begin_array().value(r.gain_ci95.low).value(r.gain_ci95.high).end_array();
    else w.null();
    w.field("significant", r.significant);
    w.field("outcome", try_outcome_name(r.outcome));
    w.field("finding", r.finding);
    w.key("estimated_gain_pct");
    r.estimated_gain_pct ? w.value(*r.estimated_gain_pct) : w.null();
    w.end_object();
  }
  w.end_array();
}

std::string experiments_text(const std::vector<ExperimentResult>& results) {
  if (results.empty()) return "";
  std::string out = "\nExperiments (--try: the script run again unprofiled, baseline and try interleaved)\n";
  for (const ExperimentResult& r : results) {
    const Experiment& e = *r.experiment;
    appendf(out, "  %s: %s\n", e.setting.c_str(), to_string(e.state));
    if (!e.applied.empty()) out += "    applied:  " + e.applied + "\n";
    if (r.measured) {
      appendf(out, "    measured: step %.2f ms -> %.2f ms, gain %.1f %% (95 %% interval %.1f .. %.1f %%; %zu + %zu steps, "
                   "%lld round(s))%s\n",
              r.baseline_ms, r.try_ms, r.gain_pct, r.gain_ci95.low, r.gain_ci95.high, r.baseline_steps, r.try_steps,
              static_cast<long long>(e.rounds), r.outcome == TryOutcome::kGain           ? ""
              : r.outcome == TryOutcome::kInconclusive ? ": inconclusive"
              : r.outcome == TryOutcome::kSlower       ? ": slower"
                                                       : ": no gain");
      if (r.estimated_gain_pct) appendf(out, "    estimated by %s: %.1f %%\n", r.finding.c_str(), *r.estimated_gain_pct);
      else if (!r.finding.empty()) appendf(out, "    %s estimated no gain; this is the measurement\n", r.finding.c_str());
    }
    if (!e.note.empty()) out += "    note:     " + e.note + "\n";
  }
  return out;
}

}  // namespace torchneck
