// Writes the run's files into the output folder. Each file is written to a
// temporary name and renamed, so a reader never sees half a file.
#pragma once

#include <string>

#include "analyze/analysis.h"
#include "model/run.h"
#include "report/trace_json.h"

namespace torchneck {

struct OutputOptions {
  std::string dir;
  std::string cwd;
  SummaryOptions summary;
  TraceJsonOptions trace;  // trace.json: its step window, and the Kineto trace for analyze
  bool write_trace = true;  // false: the caller writes trace.json itself (write_trace_json)
  // Several ranks: trace.json has them all (ranks_trace_json), on the clock
  // `rank_clock` describes; the run passed is then only the first of them.
  std::vector<RankTrace> rank_traces;
  std::string rank_clock;
};

// Returns the terminal report text. When a file cannot be written: with
// `error`, sets it to a one-line message and still returns the text (the
// user sees the report even on a full disk); without, throws
// std::runtime_error with that message.
std::string write_outputs(const Run& run, const OutputOptions& options, std::string* error = nullptr);
// The same with the analysis done by the caller (`torchneck analyze` adds
// the GPU reports and findings to it).
std::string write_analysed(const Run& run, const Analysis& analysis, const OutputOptions& options,
                           std::string* error = nullptr);
// trace.json alone, streamed to disk; throws std::runtime_error. It needs
// only `run`, `analysis.steps` and `options.trace`: `torchneck analyze`
// writes it before the GPU analyses are in, while they run on a second core.
void write_trace_json(const Run& run, const Analysis& analysis, const OutputOptions& options);

}  // namespace torchneck
