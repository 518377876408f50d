// Where the runs to analyse come from: a live session's Run, a run's folder
// (its profile.spill), a distributed job's folder of rank folders, or
// Kineto traces. Each source gives a RunSet and says what the analysis is
// to add for its kind (pipeline/analyse.h).
#pragma once

#include <string>
#include <vector>

#include "model/run.h"
#include "model/run_set.h"
#include "pipeline/options.h"

namespace torchneck {

enum class SourceKind {
  kProfiled,  // runs torchneck profiled itself: live, spilled, or rank folders
  kTraces,    // torch.profiler (Kineto) traces: the CPU side and GPU reports are still to make
};

struct Source {
  SourceKind kind = SourceKind::kProfiled;
  RunSet set;
  std::string path;        // the file or folder named, for a report of several traces
  int64_t trace_pid = 0;   // trace.json's process id when the run's list has none
};

// A live session's run at its end: the DataLoader workers' profiles in
// DIR/workers merged in (none when DIR is empty).
Source live_source(Run run, const std::string& dir);
// DIR/profile.spill read back, its workers merged when the spill has not.
// EXPERIMENTS, when given, join the run and are saved in its spill first.
Source spill_source(const std::string& dir, const std::vector<Experiment>* experiments = nullptr);
// A distributed job's folder (model/rank_folders.h): every rank's run;
// STRICT as load_rank_folders.
Source rank_folders_source(const std::string& base, bool strict);
// The Kineto trace PATH, or a folder's traces (one per rank), read within
// OPTIONS.read_limits; only their activities so far.
Source traces_source(const std::string& path, const PipelineOptions& options);

// The Kineto traces PATH names (a file, or a folder's .json and .json.gz
// files); throws std::runtime_error when it names none.
std::vector<std::string> kineto_trace_files(const std::string& path);

}  // namespace torchneck
