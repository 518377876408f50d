// What a command asks of the pipeline (pipeline/pipeline.h): every default
// of the reports, once. The launcher's options and `torchneck analyze`'s
// fill it; a field left alone is the default all commands share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "analyze/summary.h"
#include "ingest/read_limits.h"
#include "report/trace_json.h"

namespace torchneck {

// What a user sets of the reports, each by the name of its option's
// destination (python/torchneck/options.py marks those options report=True;
// the launcher hands them over by name, torchneck-analyze parses them here).
// A new one is a member and its line in each().
struct ReportSettings {
  size_t top = kDefaultTop;  // rows in each table of the terminal report
  int64_t trace_steps = kDefaultTraceSteps;  // steady steps in trace.json

  // visit(name, member, the least value, the most) for each setting.
  template <typename Visit>
  void each(Visit&& visit) {
    visit("top", top, 1, 1000);
    visit("trace_steps", trace_steps, 0, 1'000'000);
  }
};

struct PipelineOptions {
  std::string dir;  // the output folder; empty: the terminal report only
  std::string cwd;  // paths under it are shown relative to it
  ReportSettings settings;
  kineto::ReadLimits read_limits;  // the largest Kineto trace read
  bool ingest_two_threads = false;  // a large trace scanned and parsed on two threads
  // Kineto traces: the progress of reading file INDEX of COUNT, DONE of
  // TOTAL bytes (`torchneck analyze` draws a bar on a terminal).
  std::function<void(size_t index, size_t count, size_t done, size_t total)> on_read_progress;

  SummaryOptions summary() const {
    SummaryOptions s;
    s.top_python = s.top_ops = s.top_backward = s.top_scopes = settings.top;
    return s;
  }
};

}  // namespace torchneck
