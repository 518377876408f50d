// periodic_stall: every k-th step is slow, and the extra time has a cause
// that repeats: a checkpoint saved every k steps, a log line with its
// synchronisation, a loader whose k workers deliver their batches at once.
#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

// A stall worth fixing: a twentieth of the steps' time; a quarter is the
// loop's main cost.
constexpr double kStallShare = 0.05;
constexpr double kStallHighShare = 0.25;

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::string advice(const SlowGroup& g) {
  if (has(g.what, "save") || has(g.what, "serialization"))
    return "save checkpoints less often, or in the background (copy the state_dict to CPU, then torch.save it in a "
           "thread; torch.distributed.checkpoint.async_save on torch >= 2.3)";
  if (has(g.what, "print") || has(g.what, "log") || has(g.what, "write"))
    return "log less often, and keep tensors on the device between log lines (a .item() per logged value "
           "synchronises)";
  if (g.phase == Phase::kData)
    return "see input_bound: the workers' batches arrive in bursts; more workers or a cheaper __getitem__ even "
           "them out";
  return "find what the script does every " + std::to_string(g.period) +
         " steps (the slow steps' timeline in trace.json) and do it less often or asynchronously";
}

}  // namespace

void detect_periodic_stall(const DiagnosisInput& in, std::vector<Finding>& out) {
  const StepAnalysis& s = in.steps;
  for (const SlowGroup& g : s.slow) {
    if (g.kind != SlowKind::kPeriodic || g.share < kStallShare) continue;
    Finding f = make_finding(FindingId::periodic_stall);
    const bool data = g.phase == Phase::kData;
    if (data) f.severity = Severity::kLow;
    else if (g.share >= kStallHighShare) f.severity = Severity::kHigh;
    const std::string what = !g.what.empty() ? g.what
                             : data          ? "a loader burst (waiting in DataLoader __next__)"
                                             : std::string(phase_name(g.phase)) + " work";
    f.title = "Every " + std::to_string(g.period) + " steps a slow step (" + what + ") costs " + fmt_pct(g.share) +
              " of the run";
    f.evidence.push_back(std::to_string(g.steps.size()) + " slow steps, every " + std::to_string(g.period) +
                         " steps from step " + std::to_string(g.first + 1) + ", " + fmt_ms(g.excess_ns) +
                         " beyond a typical step (" + fmt_ms(s.typical_ns) + ") in all, of the " +
                         fmt_ms(g.over_ns) + " the steps after warm-up took" +
                         (g.over_ns != s.steady_ns ? " (those of costly detail windows less the detail's cost)" : ""));
    f.evidence.push_back(std::string("the extra time is ") + phase_name(g.phase) + ": " + fmt_ms(g.phase_slow_ns) +
                         " in a slow step against " + fmt_ms(g.phase_typical_ns) + " in a typical one");
    if (!g.what.empty())
      f.evidence.push_back("what runs in the slow steps and hardly in the others: " + g.what);
    else if (!data)
      f.evidence.push_back("which Python function runs in them is not known (the sampler's timeline is needed: "
                           "--python=sample)");
    f.recommendation = advice(g);
    if (data) {
      f.gain_arithmetic = "see input_bound: its estimate accounts for the workers";
    } else {
      f.estimated_gain_pct = 100.0 * g.share;
      f.gain_is_upper_bound = true;
      f.gain_arithmetic = "the slow steps' extra " + fmt_ms(g.excess_ns) + " / the steps' " + fmt_ms(g.over_ns) +
                          " (upper bound: the stall hidden or made rare)";
    }
    f.numbers = {{"period_steps", g.period}, {"share_pct", 100.0 * g.share}};
    out.push_back(std::move(f));
  }
}

}  // namespace torchneck
