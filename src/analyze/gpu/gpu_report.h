// Everything `torchneck analyze` reports about one rank's Kineto trace: the
// TensorBoard plugin's step breakdown and GPU metrics (tbplugin.h), HTA's
// breakdowns (hta.h), torchneck's own GPU facts (gpu_analysis.h), and the
// GPU findings drawn from them (gpu_detectors.cc).
#pragma once

#include <string>
#include <vector>

#include "analyze/diagnosis.h"
#include "analyze/gpu/gpu_analysis.h"
#include "analyze/gpu/hta.h"
#include "analyze/gpu/tbplugin.h"
#include "ingest/kineto_trace.h"

namespace torchneck::gpu {

struct GpuReport {
  std::string path;
  int64_t rank = -1;
  GpuFacts facts;
  TbOverview tb;
  TbGpuMetrics metrics;
  HtaBreakdowns hta;
  std::vector<Finding> findings;
};

// On the calling thread (`torchneck analyze` runs it on its second one,
// beside trace.json).
GpuReport gpu_report(const kineto::Trace& trace);

// The GPU detectors (gpu_idle, input_bound, host_sync, launch_bound,
// no_mixed_precision, communication_bound, memory_pressure,
// pageable_memcpy); appended to out.
void detect_gpu(const GpuReport& r, std::vector<Finding>& out);

}  // namespace torchneck::gpu
