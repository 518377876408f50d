// launch_bound: short kernels launched one by one while the GPU idles: the
// CPU's launch rate sets the pace.
#include "analyze/detectors/gpu_evidence.h"
#include "analyze/detectors/shared_thresholds.h"

namespace torchneck {
namespace {

// Most kernels shorter than gpu::kShortKernelNs...
constexpr double kShortKernelFraction = 0.50;
// ...and kernels start right after their launch: no queue of work ahead of
// them, so the CPU's launch rate sets the pace (a long delay means the GPU
// had work queued, and launches are not the limit).
constexpr int64_t kStarvedLaunchDelayNs = 50'000;

}  // namespace

void detect_launch_bound(const DiagnosisInput& in, std::vector<Finding>& out) {
  using namespace gpu;
  if (in.gpu == nullptr) return;
  const GpuFacts& g = in.gpu->facts;
  const double util = gpu_utilization(*in.gpu);
  if (g.kernels == 0 || util < 0 || util >= thresholds::kLowGpuUtilization) return;
  const double short_share = static_cast<double>(g.short_kernels) / static_cast<double>(g.kernels);
  if (short_share < kShortKernelFraction || g.median_launch_delay_ns >= kStarvedLaunchDelayNs) return;
  Finding f = make_finding(FindingId::launch_bound);
  f.title = "Launch-bound: " + fmt_pct(short_share) + " of the kernels run under " +
            std::to_string(kShortKernelNs / 1000) + " us while the GPU idles";
  f.evidence.push_back(std::to_string(g.kernels) + " kernels, mean " +
                       fmt_ms_of(static_cast<double>(g.kernel_ns) / static_cast<double>(g.kernels)) + "; " +
                       std::to_string(g.launches) + " launch calls took " + fmt_ms(g.launch_api_ns) + " of CPU time");
  f.evidence.push_back("median launch-to-start delay " + fmt_ms(g.median_launch_delay_ns) + ", p99 " +
                       fmt_ms(g.p99_launch_delay_ns));
  f.recommendation = "Fewer, larger kernels: torch.compile(model, mode=\"reduce-overhead\") (CUDA graphs), fused "
                     "optimizers (foreach=True / fused=True), a larger batch";
  f.gain_arithmetic = "not estimated: depends on how many launches fusion removes";
  out.push_back(std::move(f));
}

}  // namespace torchneck
