// framework_overhead: many tiny operators; dispatch and the Python between
// them, not arithmetic, fill the step.
#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

// The mean is over every operator event, nested ones included (aten::linear
// -> t, addmm, ...), so even real compute averages down: a small CNN here
// measures 15-19 us, a model of 8-element ops about 1 us. Below 10 us the
// operators carry almost no arithmetic and dispatch is the cost; a few
// hundred of them per step make it the step time.
constexpr double kTinyOpUs = 10.0;
constexpr double kManyOpsPerStep = 200.0;
// Compute phases (forward, backward, optimizer) must be most of the step
// for this to be the bottleneck rather than e.g. data loading.
constexpr double kComputeShare = 0.5;
// From 70 % of the step in compute made of tiny operators, per-op overhead
// is most of the step: the main issue.
constexpr double kComputeShareForHigh = 0.7;
// Fusing or batching typically removes most ops; we assume 80 % of the
// per-op cost goes away.
constexpr double kAssumedSaving = 0.8;

}  // namespace

void detect_framework_overhead(const DiagnosisInput& in, std::vector<Finding>& out) {
  const StepAnalysis& s = in.steps;
  const int64_t T = s.step_ns;
  if (T <= 0 || s.ops_per_step < kManyOpsPerStep) return;
  const double mean_op_us = s.op_self_ns_per_step / s.ops_per_step / 1000.0;
  const int64_t compute = s.breakdown.compute();
  if (mean_op_us > kTinyOpUs || share(compute, T) < kComputeShare) return;
  Finding f = make_finding(FindingId::framework_overhead);
  if (share(compute, T) >= kComputeShareForHigh) f.severity = Severity::kHigh;
  f.title = "Framework overhead: " + std::to_string(static_cast<int64_t>(s.ops_per_step)) +
            " tiny operators per step, " + std::to_string(static_cast<int64_t>(mean_op_us + 0.5)) + " us each";
  f.evidence.push_back(std::to_string(static_cast<int64_t>(s.ops_per_step)) + " operator calls per step on the main thread (DataLoader fetches left out), mean self time " +
                       std::to_string(mean_op_us).substr(0, 4) + " us");
  f.evidence.push_back("forward + backward + optimizer " + fmt_ms(compute) + " of a " + fmt_ms(T) + " step (" +
                       fmt_pct(share(compute, T)) + ")");
  f.recommendation =
      "Do the same work in fewer, larger operators: batch the small layers (one nn.Linear over stacked "
      "inputs or torch.bmm instead of many small ones), replace Python loops over tensors with whole-tensor "
      "ops, and on torch >= 2.0 compile the model (model = torch.compile(model)); use a larger batch";
  f.estimated_gain_pct = 100.0 * kAssumedSaving * share(compute, T);
  f.gain_arithmetic = "compute " + fmt_ms(compute) + " x " + fmt_pct(kAssumedSaving) + " (ops fused or batched away) / step " + fmt_ms(T);
  out.push_back(std::move(f));
}

}  // namespace torchneck
