// The GPU parts of the reports: profile.json's "gpu" object (and "ranks"
// for several), a live run's "gpu_window", and the terminal report's GPU
// section.
#pragma once

#include <string>

#include "analyze/gpu/gpu_report.h"
#include "report/json_writer.h"

namespace torchneck {

void write_gpu_json(JsonWriter& w, const gpu::GpuReport& r);
std::string gpu_terminal_section(const gpu::GpuReport& r, size_t top);
// profile.json's "gpu_window" (model/run.h, GpuWindow): null when mode is empty.
void write_gpu_window_json(JsonWriter& w, const GpuWindow& g);

}  // namespace torchneck
