// DataLoader worker processes: each worker writes its own Run to
// DIR/workers/*.spill at its exit (python/torchneck/workers.py); the main
// process merges them into its Run at the end: Run::processes (main first),
// Run::worker_python and Run::worker_ops (all workers together).
#pragma once

#include <string>
#include <vector>

#include "model/run.h"

namespace torchneck {

// Every DIR/workers/*.spill, sorted by worker id then pid. A file that cannot
// be read becomes a note, not an error: the rest of the report stands.
std::vector<Run> load_worker_runs(const std::string& dir, std::vector<std::string>& notes);

// Sets main.processes to {main_process, one entry per worker run} and merges
// the workers' Python functions and operators. Each worker run describes
// itself in its processes[0].
void merge_workers(Run& main, const ProcessInfo& main_process, const std::vector<Run>& workers);

// DIR/workers' profiles merged into RUN, when they are not yet (a run's end
// merges them; a periodic or crash-time spill has not): RUN's first process
// is the main one. Without workers, RUN's process list is emptied, as a run
// without workers has none.
void merge_worker_profiles(Run& run, const std::string& dir);

// The most DataLoader workers alive at one instant, by their lifetimes
// (start_ns, wall_s): a training loader's workers and an evaluation loader's
// made after them never compete for the cores. A worker whose start is
// unknown is counted as alive with every other.
int64_t peak_alive_workers(const std::vector<ProcessInfo>& processes);

// "file.py:12(name)" with the file's base name: how a hot function is named
// in one line.
std::string short_function_label(const PyFunctionStats& f);

}  // namespace torchneck
