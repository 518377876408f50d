// host_sync: the CPU blocks on the GPU (synchronising runtime calls, copies
// to pageable memory) a large share of the trace.
#include "analyze/detectors/gpu_evidence.h"

namespace torchneck {
namespace {

// 5 % of the trace blocked is worth removing (an .item() per step is a
// one-line fix); from a fifth, the GPU's queue drains at every sync and the
// step is paced by the round trips: the main issue.
constexpr double kHostSyncShare = 0.05;
constexpr double kHostSyncHighShare = 0.20;
constexpr size_t kSyncPointsShown = 3;

}  // namespace

void detect_host_sync(const DiagnosisInput& in, std::vector<Finding>& out) {
  if (in.gpu == nullptr) return;
  const gpu::GpuFacts& g = in.gpu->facts;
  if (g.span_ns <= 0 || g.syncs.empty()) return;
  const double s = share(g.sync_ns, g.span_ns);
  if (s < kHostSyncShare) return;
  Finding f = make_finding(FindingId::host_sync);
  if (s >= kHostSyncHighShare) f.severity = Severity::kHigh;
  f.title = "The CPU waits on the GPU (synchronisation) " + fmt_pct(s) + " of the trace";
  for (size_t i = 0; i < g.syncs.size() && i < kSyncPointsShown; ++i)
    f.evidence.push_back(g.syncs[i].what + " x" + std::to_string(g.syncs[i].calls) + " from " + g.syncs[i].context +
                         ": " + fmt_ms(g.syncs[i].total_ns));
  for (size_t i = 0; i < in.gpu->sync_sites.size() && i < kSyncPointsShown; ++i) {
    const gpu::SyncSite& site = in.gpu->sync_sites[i];
    f.evidence.push_back("in the script: " + site.where + ", " + std::to_string(site.calls) + " synchronising call" +
                         (site.calls == 1 ? "" : "s") + ", " + fmt_ms(site.total_ns));
  }
  f.recommendation = "Remove synchronisation from the training loop: no .item(), .cpu(), print(tensor) or "
                     "torch.cuda.synchronize() per step (accumulate losses on the GPU, read them every N steps)";
  f.estimated_gain_pct = 100.0 * s;
  f.gain_is_upper_bound = true;
  f.gain_arithmetic = "blocked time " + fmt_ms(g.sync_ns) + " of " + fmt_ms(g.span_ns) +
                      " (upper bound: the GPU work it waited for remains)";
  out.push_back(std::move(f));
}

}  // namespace torchneck
