// Writes the run's files into the output folder. Each file is written to a
// temporary name and renamed, so a reader never sees half a file.
#pragma once

#include <functional>
#include <string>
#include <vector>

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

// Returns the terminal report text, whose "Files" section names only the
// files that were written and says which could not be and why. Every file
// is tried, whatever failed before it. When one cannot be written: with
// `error`, sets it to a one-line message and still returns the text (the
// user sees the report even on a full disk); without, throws
// std::runtime_error with that message.
std::string write_outputs(const Run& run, const OutputOptions& options, std::string* error = nullptr);
// The same with the analysis done by the caller (`torchneck analyze` adds
// the GPU reports and findings to it).
std::string write_analysed(const Run& run, const Analysis& analysis, const OutputOptions& options,
                           std::string* error = nullptr);
// What a command wrote into its output folder, for the Files section.
struct WrittenFiles {
  std::vector<std::string> names;   // written, as "report.html"
  std::vector<std::string> failed;  // "trace.json: why", one each
  std::string first_error;          // the first failure's one-line message

  // Runs WRITE (which throws std::runtime_error on failure) and records NAME's outcome.
  void attempt(const std::string& name, const std::function<void()>& write);
  void add(const WrittenFiles& other);
};

// The files of write_analysed but report.txt and trace.json, each attempted;
// returns the terminal report's text without its Files section.
std::string write_report_files(const Run& run, const Analysis& analysis, const OutputOptions& options,
                               WrittenFiles& written);
// Appends the Files section to TEXT and writes it as report.txt (the
// section names report.txt only if that write succeeded); returns the text.
// The error handling is write_analysed's.
std::string finish_report_txt(std::string text, const OutputOptions& options, WrittenFiles& written,
                              std::string* error);
// trace.json alone, streamed to disk; throws std::runtime_error. It needs
// only `run`, `analysis.steps` and `options.trace`: `torchneck analyze`
// writes it before the GPU analyses are in, while they run on a second core.
void write_trace_json(const Run& run, const Analysis& analysis, const OutputOptions& options);

}  // namespace torchneck
