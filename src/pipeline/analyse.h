// A source's runs analysed: the one place where ranks are compared, a live
// run's GPU window joins it, and a trace's CPU side and GPU reports are
// made. Everything the writers show is in Analysed; they compute nothing.
#pragma once

#include <future>
#include <string>
#include <vector>

#include "analyze/analysis.h"
#include "pipeline/options.h"
#include "pipeline/sources.h"
#include "report/trace_json.h"

namespace torchneck {

struct Analysed {
  const Run* run = nullptr;  // the source's primary run: the report's tables and steps are its
  Analysis analysis;
  // Several ranks on one clock: trace.json shows each rank's steps.
  std::vector<Analysis> rank_steps;
  std::vector<RankTrace> rank_traces;
  std::string rank_clock;
  int64_t trace_pid = 0;
  // Kineto traces: every rank's GPU report, made on a second thread while
  // the CPU side is analysed; complete_analysis() joins them.
  std::future<std::vector<gpu::GpuReport>> gpu_reports;
};

// SOURCE's runs analysed; they must outlive the result (which points into
// them and, for traces, still reads them on a second thread).
Analysed analyse(Source& source, const PipelineOptions& options);

// The rest of the analysis: the flame graph, and what analyse() left
// running joined to it (the first rank's GPU findings combine with the CPU
// side's). Only `steps` may be read while it runs.
void complete_analysis(Analysed& a);

}  // namespace torchneck
