// input_bound, GPU side: the host waits for data while the GPU idles (the
// TensorBoard plugin's DataLoader share of each ProfilerStep).
#include "analyze/detectors/gpu_evidence.h"
#include "analyze/detectors/shared_thresholds.h"

namespace torchneck {

void detect_input_bound_gpu(const DiagnosisInput& in, std::vector<Finding>& out) {
  using namespace gpu;
  using namespace thresholds;
  if (in.gpu == nullptr) return;
  const TbOverview& tb = in.gpu->tb;
  const double step = tb.avg_total_ns;
  if (step <= 0) return;
  const double data = tb_avg_ns(tb, TbRole::kDataLoader);
  const double share_data = data / step;
  if (share_data < kDataWaitShareOnGpu) return;
  const double util = gpu_utilization(*in.gpu);
  Finding f = make_finding(FindingId::input_bound);
  if (share_data >= kDataWaitHighShareOnGpu) f.severity = Severity::kHigh;
  f.title = "Input-bound: the GPU waits for data " + fmt_pct(share_data) + " of each step";
  f.evidence.push_back("mean step " + fmt_ms_of(step) + ", of which " + fmt_ms_of(data) + " in DataLoader (" +
                       fmt_pct(share_data) + "), over " + std::to_string(tb.steps.size()) +
                       " ProfilerSteps (the TensorBoard plugin's breakdown)");
  if (util >= 0) f.evidence.push_back("GPU utilization " + fmt_pct(util) + " over the steps");
  f.recommendation =
      "DataLoader(..., num_workers=4 or more, pin_memory=True, persistent_workers=True): load the next "
      "batches in worker processes while the GPU computes";
  // Workers overlap loading with the rest of the step: at best the step
  // loses the whole DataLoader time.
  f.estimated_gain_pct = 100.0 * share_data;
  f.gain_is_upper_bound = true;
  f.gain_arithmetic = "step " + fmt_ms_of(step) + " - DataLoader " + fmt_ms_of(data) + " (overlapped by workers) = " +
                      fmt_ms_of(step - data) + " (upper bound)";
  out.push_back(std::move(f));
}

}  // namespace torchneck
