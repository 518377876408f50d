// memory_pressure: device memory peaks close to the GPU's capacity.
#include <algorithm>

#include "analyze/detectors/gpu_evidence.h"

namespace torchneck {
namespace {

// Peak memory this close to the device's: the next larger batch or model
// runs out of memory, and the caching allocator may already thrash.
constexpr double kMemoryPressure = 0.90;

}  // namespace

void detect_memory_pressure(const DiagnosisInput& in, std::vector<Finding>& out) {
  if (in.gpu == nullptr) return;
  const gpu::GpuFacts& g = in.gpu->facts;
  const int64_t peak = std::max(g.peak_allocated, g.peak_reserved);
  if (g.device_memory <= 0 || peak < 0 || share(peak, g.device_memory) < kMemoryPressure) return;
  Finding f = make_finding(FindingId::memory_pressure);
  f.title = "Device memory peaks at " + fmt_pct(share(peak, g.device_memory)) + " of the GPU's";
  f.evidence.push_back("peak " + std::string(g.peak_reserved >= g.peak_allocated ? "reserved" : "allocated") + " " +
                       std::to_string(peak >> 20) + " MiB of " + std::to_string(g.device_memory >> 20) + " MiB" +
                       (g.peak_is_lower_bound ? " (at least: allocations since the trace started)" : ""));
  f.recommendation = "Make room before scaling up: activation checkpointing (torch.utils.checkpoint), mixed "
                     "precision, a smaller batch with gradient accumulation; set "
                     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation";
  f.gain_arithmetic = "not estimated: a risk (out of memory, allocator retries), not a cost per step";
  out.push_back(std::move(f));
}

}  // namespace torchneck
