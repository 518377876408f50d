// framework_overhead: many small operators issued by the loop itself;
// dispatch and the Python between them, not arithmetic, fill the step.
#include <algorithm>
#include <cstdio>

#include "analyze/diagnosis.h"
#include "analyze/top_level_ops.h"

namespace torchneck {
namespace {

// Operators as the loop issues them: top-level ones (TopLevelOps, steps.h).
// One that calls many others (aten::bmm's per-matrix selects) is one call
// the script made, and a fusion the script cannot do better. A few hundred
// small calls a step make their fixed costs add up.
constexpr double kManySmallCallsPerStep = 200.0;
// The small calls and the time between calls (Python, autograd's engine)
// must be most of the compute: a model of large matmuls beside many small
// calls is bound by its matmuls.
constexpr double kSmallCallsComputeShare = 0.5;
// Compute phases (forward, backward, optimizer) must be most of the step
// for this to be the bottleneck rather than e.g. data loading.
constexpr double kComputeShare = 0.5;
// From 70 % of the step in compute, per-call overhead is most of the step.
constexpr double kComputeShareForHigh = 0.7;

std::string us(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  return buf;
}

std::string count(double n) { return std::to_string(static_cast<int64_t>(n + 0.5)); }

std::string most_called(const TopLevelOps& t) {
  std::string out;
  for (const auto& [name, per_step] : t.most_called) out += (out.empty() ? "" : ", ") + name + " " + count(per_step);
  return out;
}

}  // namespace

void detect_framework_overhead(const DiagnosisInput& in, std::vector<Finding>& out) {
  const StepAnalysis& s = in.steps;
  const TopLevelOps& t = s.top_level_ops;
  const int64_t T = s.step_ns;
  if (T <= 0 || t.small_per_step < kManySmallCallsPerStep || t.compute_ns_per_step <= 0) return;
  // Measured in the detailed steps: the small calls' time, and the compute
  // time outside every call (the Python and autograd around the calls).
  const double between = std::max(0.0, t.compute_ns_per_step - t.ns_per_step);
  const double part = std::min(1.0, (t.small_ns_per_step + between) / t.compute_ns_per_step);
  const int64_t compute = s.breakdown.compute();
  if (part < kSmallCallsComputeShare || share(compute, T) < kComputeShare) return;

  Finding f = make_finding(FindingId::framework_overhead);
  if (share(compute, T) >= kComputeShareForHigh) f.severity = Severity::kHigh;
  f.title = "Framework overhead: " + count(t.small_per_step) + " small operator calls per step, " +
            us(t.small_ns_per_step / t.small_per_step) + " each";
  f.evidence.push_back(count(t.per_step) + " operator calls per step by the loop itself, " + count(t.small_per_step) +
                       " of them under " + us(static_cast<double>(kSmallCallNs)) + " with what they call (" +
                       count(std::max(0.0, s.ops_per_step - t.per_step)) +
                       " nested calls not counted; DataLoader fetches and evaluation left out)");
  if (!t.most_called.empty()) f.evidence.push_back("the most called, a step: " + most_called(t));
  f.evidence.push_back("in the detailed steps' " + fmt_ms(static_cast<int64_t>(t.compute_ns_per_step)) +
                       " of compute: the small calls " + fmt_ms(static_cast<int64_t>(t.small_ns_per_step)) +
                       ", between calls " + fmt_ms(static_cast<int64_t>(between)) + " (" + fmt_pct(part) + ")");
  f.evidence.push_back("forward + backward + optimizer " + fmt_ms(compute) + " of a " + fmt_ms(T) + " step (" +
                       fmt_pct(share(compute, T)) + ")");
  f.recommendation =
      "Do the same work in fewer, larger operators: replace Python loops over tensors or samples with "
      "whole-tensor operations (stack the pieces, apply one operator), batch many small layers into one, "
      "and on torch >= 2.0 compile the model (model = torch.compile(model)); a larger batch spreads the "
      "same calls over more samples";
  // What the fused operators still compute is not measured here: the bound
  // is the small calls and the time between calls gone entirely.
  f.estimated_gain_pct = 100.0 * part * share(compute, T);
  f.gain_is_upper_bound = true;
  f.gain_arithmetic = "the small calls and the time between calls, " + fmt_pct(part) +
                      " of the detailed steps' compute, x compute " + fmt_ms(compute) + " / step " + fmt_ms(T) +
                      " (upper bound: what the fused operators still compute is not measured)";
  out.push_back(std::move(f));
}

}  // namespace torchneck
