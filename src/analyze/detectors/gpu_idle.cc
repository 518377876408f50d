// gpu_idle: the GPU is idle much of each step; the evidence splits the idle
// time by cause (host-side categories, HTA's idle-time breakdown).
#include "analyze/detectors/gpu_evidence.h"
#include "analyze/detectors/shared_thresholds.h"

namespace torchneck {

void detect_gpu_idle(const DiagnosisInput& in, std::vector<Finding>& out) {
  using namespace gpu;
  if (in.gpu == nullptr) return;
  const GpuReport& r = *in.gpu;
  const double util = gpu_utilization(r);
  if (util < 0 || util >= thresholds::kLowGpuUtilization) return;
  const double step = r.tb.avg_total_ns;
  Finding f = make_finding(FindingId::gpu_idle);
  f.title = "The GPU is idle " + fmt_pct(1 - util) + " of the steps";
  f.evidence.push_back("GPU utilization " + fmt_pct(util) +
                       " (kernel busy time / step span, the TensorBoard plugin's definition)");
  if (step > 0) {
    const double data = tb_avg_ns(r.tb, TbRole::kDataLoader), cpu = tb_avg_ns(r.tb, TbRole::kCpuExec),
                 other = tb_avg_ns(r.tb, TbRole::kOther);
    f.evidence.push_back("per step, the host side without device work: DataLoader " + fmt_ms_of(data) + ", CPU exec " +
                         fmt_ms_of(cpu) + ", other " + fmt_ms_of(other) + " (" + fmt_pct((data + cpu + other) / step) +
                         ")");
  }
  int64_t host = 0, kernel = 0, other = 0;
  for (const auto& st : r.hta.idle) {
    host += st.host_wait_us;
    kernel += st.kernel_wait_us;
    other += st.other_us;
  }
  const int64_t idle = host + kernel + other;
  if (idle > 0)
    f.evidence.push_back("idle time by cause (HTA's idle-time breakdown, all streams): waiting for the host to launch " +
                         fmt_pct(share(host, idle)) + ", between back-to-back kernels " + fmt_pct(share(kernel, idle)) +
                         ", other " + fmt_pct(share(other, idle)));
  f.recommendation = "Keep the GPU fed: see the findings on data loading, synchronisation and launches; a larger "
                     "batch gives the GPU more work per launch";
  f.gain_arithmetic = "not estimated: the idle time is the sum of its causes, which the other findings estimate";
  out.push_back(std::move(f));
}

}  // namespace torchneck
