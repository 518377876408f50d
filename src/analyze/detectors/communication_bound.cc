// communication_bound: collective communication takes a large share of the
// GPU's time (the TensorBoard plugin's category, HTA's kernel types).
#include <algorithm>

#include "analyze/detectors/gpu_evidence.h"

namespace torchneck {
namespace {

// A fifth of the step in communication that kernels do not hide: enough
// that overlapping it with backward or communicating less often pays.
constexpr double kCommunicationShare = 0.20;

}  // namespace

void detect_communication_bound(const DiagnosisInput& in, std::vector<Finding>& out) {
  using namespace gpu;
  if (in.gpu == nullptr) return;
  const GpuReport& r = *in.gpu;
  const double step = r.tb.avg_total_ns;
  if (step <= 0) return;
  const double comm = tb_avg_ns(r.tb, TbRole::kCommunication);
  double hta_comm = 0, hta_overlap = 0;  // shares of GPU busy time, HTA's kernel-type breakdown
  for (const auto& k : r.hta.kernel_types) {
    if (k.kernel_type == "COMMUNICATION") hta_comm += k.percentage / 100.0;
    else if (k.kernel_type.find("COMMUNICATION") != std::string::npos) hta_overlap += k.percentage / 100.0;
  }
  if (comm / step < kCommunicationShare && hta_comm < kCommunicationShare) return;
  Finding f = make_finding(FindingId::communication_bound);
  f.title = "Communication takes " + fmt_pct(std::max(comm / step, hta_comm)) + " of the GPU's time";
  f.evidence.push_back("mean step " + fmt_ms_of(step) + ", of which " + fmt_ms_of(comm) +
                       " in communication not hidden behind kernels");
  if (hta_comm + hta_overlap > 0)
    f.evidence.push_back("of GPU busy time: communication alone " + fmt_pct(hta_comm) +
                         ", communication overlapping other kernels " + fmt_pct(hta_overlap) +
                         " (HTA's kernel-type breakdown)");
  f.recommendation = "Overlap communication with backward (DDP bucket_cap_mb, gradient_as_bucket_view=True), "
                     "accumulate gradients over more micro-batches (no_sync()), or compress gradients";
  f.gain_arithmetic = "not estimated: depends on how much of it the backward pass can hide";
  out.push_back(std::move(f));
}

}  // namespace torchneck
