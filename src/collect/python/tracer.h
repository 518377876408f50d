// The deterministic Python tracer: cProfile's statistics (Modules/_lsprof.c)
// for every thread, from a C profile hook (PyEval_SetProfile), with
// per-thread tables so the hook takes no lock.
#pragma once

#include <string>

#include "model/run.h"

namespace torchneck {

struct TracerOptions {
  bool builtins = true;  // profile C functions too, as cProfile does
};

// Caller holds the GIL. Hooks the calling thread, every existing thread, and
// (through threading.setprofile) threads started later.
bool start_tracer(const TracerOptions& options, std::string* error);
// Caller holds the GIL. Unhooks every thread.
void stop_tracer();
// Caller holds the GIL. Fills run.python with the merged per-thread stats.
void collect_tracer(Run& run);
// Caller holds the GIL (the hook only runs with it). The statistics of the
// calls completed so far, without unhooking or clearing (periodic spills).
void snapshot_tracer(Run& run);

}  // namespace torchneck
