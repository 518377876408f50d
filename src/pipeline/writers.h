// The files a report writes into its output folder, one registered writer
// each, in the order the report's Files section lists them (the one to open
// first, then those for other tools): a new file is one entry here
// (writers.cc) and its renderer in report/. report.txt is not among them:
// it is written last, naming what the others wrote (pipeline.cc).
#pragma once

#include <string>
#include <vector>

#include "pipeline/analyse.h"
#include "pipeline/options.h"

namespace torchneck {

struct Writer {
  const char* file;         // its name in the output folder
  const char* how_to_open;  // the Files section's line for it
  // false: it reads only the run and `analysis.steps`, and is written while
  // a trace's GPU reports are still being made (complete_analysis).
  bool needs_whole_analysis = true;
  // Whether this run has the file at all; null: every run.
  bool (*wanted)(const Analysed& a) = nullptr;
  // Writes PATH, all or nothing (core/files.h); throws std::runtime_error
  // with a one-line message.
  void (*write)(const Analysed& a, const PipelineOptions& options, const std::string& path) = nullptr;
};

const std::vector<Writer>& registered_writers();

}  // namespace torchneck
