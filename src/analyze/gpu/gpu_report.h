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

// Where in the script synchronising calls came from (a live run's window).
struct SyncSite {
  std::string where;  // "train.py:30(train)": file (short), line of the function's def, function
  uint64_t calls = 0;
  int64_t total_ns = 0;
};

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
  // A live run's window only (gpu/live_window.h, sync_sites): where in the
  // script its synchronising calls came from.
  std::vector<SyncSite> sync_sites;
};

// On the calling thread (`torchneck analyze` runs it on its second one,
// beside trace.json).
GpuReport gpu_report(const Run& run);

}  // namespace torchneck::gpu
