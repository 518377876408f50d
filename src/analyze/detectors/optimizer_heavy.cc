// optimizer_heavy: optimizer.step and zero_grad take a large share.
#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

constexpr double kOptimizerShare = 0.20;
constexpr double kOptimizerHighShare = 0.40;
// foreach implementations update all parameters in a few multi-tensor
// kernels instead of one small op per tensor; with many parameter tensors
// that removes most of the per-tensor cost. Assumed saving: half.
constexpr double kAssumedSaving = 0.5;
// With foreach already on, what is left is fused=True and set_to_none: a
// fifth of that saving (10 % of the optimizer's time).
constexpr double kForeachAlreadyOnFactor = 0.2;

int major_version(const std::string& v) {
  return v.empty() ? 0 : std::atoi(v.c_str());
}

}  // namespace

void detect_optimizer_heavy(const DiagnosisInput& in, std::vector<Finding>& out) {
  const StepAnalysis& s = in.steps;
  const int64_t T = s.step_ns;
  const int64_t O = s.breakdown[Phase::kOptimizer];
  const double part = share(O, T);
  if (T <= 0 || part < kOptimizerShare) return;
  Finding f = make_finding(FindingId::optimizer_heavy);
  if (part >= kOptimizerHighShare) f.severity = Severity::kHigh;
  f.title = "The optimizer takes " + fmt_pct(part) + " of each step";
  f.evidence.push_back("optimizer step + zero_grad " + fmt_ms(O) + " of a " + fmt_ms(T) + " step on average");
  bool foreach = false;
  int64_t tensors = 0;
  std::string types;
  for (const auto& o : in.env.optimizers) {
    foreach = foreach || o.foreach;
    tensors += o.param_tensors;
    types += (types.empty() ? "" : ", ") + o.type;
  }
  if (!types.empty())
    f.evidence.push_back("optimizers: " + types + ", " + std::to_string(tensors) + " parameter tensors" +
                         (foreach ? ", foreach already on" : ""));
  const bool v2 = major_version(in.env.torch) >= 2;
  f.recommendation = std::string(foreach ? "" : "pass foreach=True to the optimizer (e.g. torch.optim.AdamW(params, lr, foreach=True)); ") +
                     (v2 && in.env.cuda ? "on GPU try fused=True; " : "") +
                     "call optimizer.zero_grad(set_to_none=True)" + (v2 ? " (the default in torch 2.x)" : "");
  const double saving = kAssumedSaving * (foreach ? kForeachAlreadyOnFactor : 1.0);
  f.estimated_gain_pct = 100.0 * saving * part;
  f.gain_arithmetic = "optimizer " + fmt_ms(O) + " x " + fmt_pct(saving) +
                      " (multi-tensor updates) / step " + fmt_ms(T);
  out.push_back(std::move(f));
}

}  // namespace torchneck
