// Writes the run's files into the output folder. Each file is written to a
// temporary name and renamed, so a reader never sees half a file.
#pragma once

#include <string>

#include "analyze/analysis.h"
#include "model/run.h"

namespace torchneck {

struct OutputOptions {
  std::string dir;
  std::string cwd;
  SummaryOptions summary;
};

// Returns the terminal report text. Throws std::runtime_error with a
// one-line message when a file cannot be written.
std::string write_outputs(const Run& run, const OutputOptions& options);

}  // namespace torchneck
