// heavy_layer: one layer takes a large share of forward + backward.
#include <algorithm>

#include "analyze/detectors/shared_thresholds.h"
#include "analyze/diagnosis.h"
#include "analyze/layer_advice.h"
#include "core/stats.h"

namespace torchneck {
namespace {

// A leaf layer with 40 % of the model's forward+backward time dominates it;
// the seed's case (an oversized fully connected layer) is far above that.
constexpr double kHeavyLayerShare = 0.40;
constexpr double kHeavyLayerHighShare = 0.60;
// High severity also needs compute to matter: forward+backward at least
// half the step.
constexpr double kComputeShareForHigh = 0.50;
// Below this share of the step in the layer's own forward + backward, it is
// no bottleneck, however lopsided the model (a small model in an input-bound
// step). The layer's share of the step, not the model's: a loader in the
// main process adds to the step beside a layer that still costs a third of it.
constexpr double kMinLayerStepShare = kHeavyLayerShare * 0.40;
// A model of one leaf layer with parameters has nothing to compare it with.
constexpr size_t kMinLeaves = 2;
// Layers of one type and size do the same work: on contended cores, one
// that takes over twice its twins' median took a wait for a CPU, not work.
constexpr double kTwinExcessFactor = 2.0;

// The median time of the leaf layers of `heavy`'s type and parameter count
// (itself left out); -1 when it has none.
int64_t twins_median(const std::vector<LayerStats>& layers, const LayerStats& heavy) {
  std::vector<int64_t> twins;
  for (const LayerStats& l : layers)
    if (&l != &heavy && l.leaf && l.depth > 0 && l.calls > 0 && l.type == heavy.type && l.params == heavy.params)
      twins.push_back(l.worked());
  return twins.empty() ? -1 : middle_value(std::move(twins));
}

}  // namespace

void detect_heavy_layer(const DiagnosisInput& in, std::vector<Finding>& out) {
  // Each layer by the time its work took (LayerStats::worked): a wait that
  // landed in a few of its calls is no part of what shrinking it saves.
  int64_t model_total = 0;
  for (const LayerStats& l : in.layers)
    if (l.depth == 0) model_total += l.worked();
  if (model_total <= 0) return;
  const LayerStats* heavy = nullptr;
  size_t leaves = 0;
  for (const LayerStats& l : in.layers)
    if (l.leaf && l.depth > 0 && l.calls > 0) {
      leaves += l.params > 0;
      if (heavy == nullptr || l.worked() > heavy->worked()) heavy = &l;
    }
  // One layer with weights is no heavy one among others (a polynomial fit's
  // Linear(3, 1) beside a Flatten): what would the model shrink instead?
  if (heavy == nullptr || leaves < kMinLeaves) return;
  const double part = share(heavy->worked(), model_total);
  if (part < kHeavyLayerShare) return;
  const StepAnalysis& s = in.steps;
  const int64_t T = s.step_ns;
  const double compute = share(s.breakdown[Phase::kForward] + s.breakdown[Phase::kBackward], T);
  if (part * compute < kMinLayerStepShare) return;
  Finding f = make_finding(FindingId::heavy_layer);
  if (part >= kHeavyLayerHighShare && compute >= kComputeShareForHigh) f.severity = Severity::kHigh;
  // Cores contended: each layer's time includes waiting for a CPU, which
  // lands on whatever runs then. A parameterless layer (an activation, a
  // reshape) on top is then more likely the wait than its work: not to be
  // acted on. A layer with parameters keeps its severity, with a caution.
  const bool contended = in.main_runqueue_fraction >= thresholds::kContendedRunqueueShare;
  const int64_t twins = contended ? twins_median(in.layers, *heavy) : -1;
  const bool outran_twins = twins > 0 && static_cast<double>(heavy->worked()) > kTwinExcessFactor * static_cast<double>(twins);
  if (contended && (heavy->params == 0 || outran_twins)) f.severity = Severity::kLow;
  f.title = "Layer " + heavy->name + " (" + heavy->type + ") takes " + fmt_pct(part) +
            " of the model's forward + backward time";
  f.evidence.push_back(heavy->name + ": forward " + fmt_ms(heavy->forward_ns) + ", backward " +
                       fmt_ms(heavy->backward_ns) + " over " + std::to_string(heavy->calls) + " calls, " +
                       std::to_string(heavy->params) + " parameters");
  if (heavy->stalled_ns > 0)
    f.evidence.push_back(heavy->name + ": " + fmt_ms(heavy->stalled_ns) +
                         " of that in calls over " + std::to_string(static_cast<int>(kStalledCallFactor)) + " times" +
                         " its median call, waits more likely than work: left out of its share");
  if (!heavy->config.empty())
    f.evidence.push_back(heavy->name + ": " + heavy->type + "(" + heavy->config + ")" +
                         (heavy->output_layer ? ", the model's output layer" : ""));
  if (contended)
    f.evidence.push_back("caution: the loop waited for a CPU " + fmt_pct(in.main_runqueue_fraction) +
                         " of the training loop (core_contention): layer times include that wait");
  if (outran_twins)
    f.evidence.push_back("layers of its type and size took " + fmt_ms(twins) + " (median): the rest is more likely that wait than its work");
  f.evidence.push_back("whole model: " + fmt_ms(model_total) + " forward + backward");
  f.evidence.push_back("forward + backward are " + fmt_pct(compute) + " of a step on average");
  const LayerAdvice advice = layer_advice(*heavy, in.layers);
  f.recommendation = advice.change;
  if (T > 0) {
    // The layer's cost per step is its share of the model's training work
    // (calls in evaluation passes are counted apart, LayerStats::eval_*)
    // applied to the step's forward + backward: never more than the step.
    const int64_t compute_ns = s.breakdown[Phase::kForward] + s.breakdown[Phase::kBackward];
    const double per_step = part * static_cast<double>(compute_ns);
    const double removed = advice.saving.value_or(advice.at_most);
    f.estimated_gain_pct = 100.0 * removed * per_step / static_cast<double>(T);
    f.gain_is_upper_bound = !advice.saving.has_value();
    f.gain_arithmetic = heavy->name + " " + fmt_pct(part) + " of forward + backward " + fmt_ms(compute_ns) + " = " +
                        fmt_ms(static_cast<int64_t>(per_step)) + " per step x " + fmt_pct(removed) + " (" +
                        (advice.saving ? advice.saving_basis : advice.at_most_basis) + ") / step " + fmt_ms(T);
  }
  out.push_back(std::move(f));
}

}  // namespace torchneck
