// pageable_memcpy: copies between the GPU and pageable (unpinned) host
// memory, which cannot overlap compute.
#include "analyze/detectors/gpu_evidence.h"

namespace torchneck {
namespace {

// 1 % of the trace: cheap to fix (pin_memory=True, non_blocking=True), so
// worth naming early, at low severity.
constexpr double kPageableShare = 0.01;

}  // namespace

void detect_pageable_memcpy(const DiagnosisInput& in, std::vector<Finding>& out) {
  if (in.gpu == nullptr) return;
  const gpu::GpuFacts& g = in.gpu->facts;
  if (g.pageable_copies == 0 || g.span_ns <= 0 || share(g.pageable_ns, g.span_ns) < kPageableShare) return;
  Finding f = make_finding(FindingId::pageable_memcpy);
  f.title = "Copies between the GPU and pageable host memory: " + fmt_pct(share(g.pageable_ns, g.span_ns)) +
            " of the trace";
  f.evidence.push_back(std::to_string(g.pageable_copies) + " copies, " + std::to_string(g.pageable_bytes >> 20) +
                       " MiB, " + fmt_ms(g.pageable_ns));
  // A live run knows its DataLoaders: name the ones that do not pin.
  std::string unpinned;
  for (const DataLoaderFacts& d : in.env.dataloaders)
    if (!d.pin_memory) unpinned += (unpinned.empty() ? "" : ", ") + (d.created_at.empty() ? d.dataset_type : d.created_at);
  if (!unpinned.empty()) f.evidence.push_back("DataLoader without pin_memory: " + unpinned);
  f.recommendation = "Pinned memory: DataLoader(..., pin_memory=True) and tensor.to(\"cuda\", non_blocking=True)" +
                     (unpinned.empty() ? std::string() : " at " + unpinned);
  f.gain_arithmetic = "not estimated: pinned copies are faster and can overlap compute";
  out.push_back(std::move(f));
}

}  // namespace torchneck
