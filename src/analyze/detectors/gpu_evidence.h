// What the GPU detectors read from a GpuReport, in one place.
#pragma once

#include "analyze/diagnosis.h"
#include "analyze/gpu/gpu_report.h"

namespace torchneck::gpu {

// Mean time per step in one of the TensorBoard plugin's categories.
inline double tb_avg_ns(const TbOverview& tb, TbRole role) { return tb.avg_ns[static_cast<int>(role)]; }

// The first device's utilization over the steps, -1 when unknown.
inline double gpu_utilization(const GpuReport& r) {
  return r.metrics.devices.empty() ? -1 : r.metrics.devices.front().utilization;
}

// Findings write milliseconds from the reports' nanoseconds (some are means).
inline std::string fmt_ms_of(double ns) { return fmt_ms(static_cast<int64_t>(ns)); }

}  // namespace torchneck::gpu
