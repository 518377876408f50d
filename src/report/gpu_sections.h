// The GPU parts of the reports of `torchneck analyze`: profile.json's "gpu"
// object (and "ranks" for several) and the terminal report's GPU section.
#pragma once

#include <string>

#include "analyze/gpu/gpu_report.h"
#include "report/json_writer.h"

namespace torchneck {

void write_gpu_json(JsonWriter& w, const gpu::GpuReport& r);
std::string gpu_terminal_section(const gpu::GpuReport& r, size_t top);

}  // namespace torchneck
