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

// One step of a live run's GPU window: how much of it some device worked,
// and why it idled the rest: the main thread was fetching data, or not (it
// was running Python and launching: the GPU waited for the CPU).
struct WindowStepGpu {
  size_t step = 0;  // index into StepAnalysis::steps
  int64_t step_ns = 0;
  int64_t busy_ns = 0;       // the union of all device work inside the step
  int64_t idle_data_ns = 0;  // idle while the main thread waited for a batch
  int64_t idle_cpu_ns = 0;   // idle otherwise
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
  // A live run's window only (gpu/gpu_window.h, sync_sites): where in the
  // script its synchronising calls came from.
  std::vector<SyncSite> sync_sites;
  std::vector<WindowStepGpu> window_steps;  // a live run's window only (gpu/gpu_window.h)
};

// On the calling thread (`torchneck analyze` runs it on its second one,
// beside trace.json).
GpuReport gpu_report(const Run& run);

}  // namespace torchneck::gpu
