// Everything `torchneck analyze` reports about one rank's Kineto trace: the
// TensorBoard plugin's step breakdown and GPU metrics (tbplugin.h), HTA's
// breakdowns (hta.h), torchneck's own GPU facts (gpu_analysis.h), and the
// GPU findings drawn from them (the detectors in analyze/detectors/ that
// read Evidence::kGpu).
#pragma once

#include <string>
#include <vector>

#include "analyze/findings.h"
#include "analyze/gpu/gpu_analysis.h"
#include "analyze/gpu/hta.h"
#include "analyze/gpu/tbplugin.h"
#include "model/run.h"

namespace torchneck::gpu {

struct GpuReport {
  std::string path;
  int64_t rank = -1;
  GpuFacts facts;
  TbOverview tb;
  TbGpuMetrics metrics;
  HtaBreakdowns hta;
  // The GPU detectors' findings on this rank alone (the first rank's also
  // go into the run's diagnosis: analysis.h, add_gpu_reports).
  std::vector<Finding> findings;
};

// On the calling thread (`torchneck analyze` runs it on its second one,
// beside trace.json).
GpuReport gpu_report(const Run& run);

}  // namespace torchneck::gpu
