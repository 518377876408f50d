// framework_overhead: many small operators issued by the loop itself;
// dispatch and the Python between them, not arithmetic, fill the step.
#include <algorithm>
#include <cstdio>

#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

// Operators as the loop issues them: top-level ones (TopLevelOps, steps.h).
// One that calls many others (aten::bmm's per-matrix selects) is one call
// the script made, and a fusion the script cannot do better.
constexpr double kManyOpsPerStep = 200.0;
// An operator whose time, nested calls included, is under 20 us carries
// little arithmetic beside a dispatch that costs a few us on its own.
constexpr double kTinyOpUs = 20.0;
// Compute phases (forward, backward, optimizer) must be most of the step
// for this to be the bottleneck rather than e.g. data loading.
constexpr double kComputeShare = 0.5;
// From 70 % of the step in compute made of small operators, per-op overhead
// is most of the step: the main issue.
constexpr double kComputeShareForHigh = 0.7;

std::string us(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  return buf;
}

std::string most_called(const TopLevelOps& t) {
  std::string out;
  for (const auto& [name, per_step] : t.most_called) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " %.0f a step", per_step);
    out += (out.empty() ? "" : ", ") + name + buf;
  }
  return out;
}

}  // namespace

void detect_framework_overhead(const DiagnosisInput& in, std::vector<Finding>& out) {
  const StepAnalysis& s = in.steps;
  const TopLevelOps& t = s.top_level_ops;
  const int64_t T = s.step_ns;
  if (T <= 0 || t.per_step < kManyOpsPerStep || t.compute_ns_per_step <= 0) return;
  const double mean_op_ns = t.ns_per_step / t.per_step;
  const int64_t compute = s.breakdown.compute();
  if (mean_op_ns > kTinyOpUs * 1e3 || share(compute, T) < kComputeShare) return;
  // What fewer, larger operators save at most, as measured in the detailed
  // steps: each call's floor (what one that does almost nothing costs) and
  // the compute time between calls (the Python and autograd around them).
  const double per_call = t.per_step * static_cast<double>(t.floor_ns);
  const double between = std::max(0.0, t.compute_ns_per_step - t.ns_per_step);
  const double removable = std::min(1.0, (per_call + between) / t.compute_ns_per_step);

  Finding f = make_finding(FindingId::framework_overhead);
  if (share(compute, T) >= kComputeShareForHigh) f.severity = Severity::kHigh;
  const std::string calls = std::to_string(static_cast<int64_t>(t.per_step + 0.5));
  f.title = "Framework overhead: " + calls + " small operators per step, " + us(mean_op_ns) + " each";
  f.evidence.push_back(calls + " operator calls per step by the loop itself (not counting the " +
                       std::to_string(static_cast<int64_t>(std::max(0.0, s.ops_per_step - t.per_step) + 0.5)) +
                       " they call; DataLoader fetches and evaluation left out), " + us(mean_op_ns) +
                       " each on average with what they call");
  if (!t.most_called.empty()) f.evidence.push_back("the most called: " + most_called(t));
  f.evidence.push_back("an operator that does almost nothing takes " + us(static_cast<double>(t.floor_ns)) +
                       " here (the 10th percentile of their times); between them, " +
                       fmt_ms(static_cast<int64_t>(between)) + " of each step's compute");
  f.evidence.push_back("forward + backward + optimizer " + fmt_ms(compute) + " of a " + fmt_ms(T) + " step (" +
                       fmt_pct(share(compute, T)) + ")");
  f.recommendation =
      "Do the same work in fewer, larger operators: replace Python loops over tensors or samples with "
      "whole-tensor operations (stack the pieces, apply one operator), batch many small layers into one, "
      "and on torch >= 2.0 compile the model (model = torch.compile(model)); a larger batch spreads the "
      "same calls over more samples";
  f.estimated_gain_pct = 100.0 * removable * share(compute, T);
  f.gain_arithmetic = "at most (" + calls + " calls x " + us(static_cast<double>(t.floor_ns)) + " + " +
                      fmt_ms(static_cast<int64_t>(between)) + " between them) / " +
                      fmt_ms(static_cast<int64_t>(t.compute_ns_per_step)) + " compute in the detailed steps = " +
                      fmt_pct(removable) + " of compute " + fmt_ms(compute) + " / step " + fmt_ms(T);
  out.push_back(std::move(f));
}

}  // namespace torchneck
