// The GPUs over the whole run from NVML (Run::nvml_devices, Run::nvml):
// per GPU, how busy it was over the run and over the steady steps, its
// memory peak, its power, and its SM clock's range (a clock that drops
// under load is the hint of thermal or power throttling). What the GPU
// line of the terminal report, profile.json's "nvml" and report.html show.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "analyze/memory.h"
#include "analyze/steps.h"
#include "model/run.h"

namespace torchneck {

// Means over the samples that have the figure (the samples are evenly
// spaced, also after thinning, so a mean of them is a mean over time); -1
// where no sample has it.
struct NvmlDeviceSummary {
  size_t samples = 0;
  double gpu_util_mean = -1;  // % over the run
  int32_t gpu_util_peak = -1;
  double mem_util_mean = -1;
  // Over the steady steps (analyze/memory.h, steady_span): a run's warm-up
  // and its end (loading, saving) leave the GPU idle, and would hide how
  // busy training keeps it.
  size_t steady_samples = 0;
  double gpu_util_steady_mean = -1;
  int64_t mem_used_peak = -1;  // bytes
  int64_t mem_total = -1;
  double power_mean_mw = -1;
  int64_t power_peak_mw = -1;
  int32_t sm_clock_min = -1, sm_clock_max = -1;  // MHz
};

struct NvmlAnalysis {
  bool sampled = false;  // Run::nvml has samples
  int64_t interval_ns = 0;
  SteadySpan span;
  std::vector<NvmlDeviceSummary> devices;  // beside Run::nvml_devices
};

NvmlAnalysis analyze_nvml(const Run& run, const StepAnalysis& steps);

}  // namespace torchneck
