// The deterministic Python tracer: cProfile's statistics (Modules/_lsprof.c)
// for every thread, from a C profile hook (PyEval_SetProfile), with
// per-thread tables so the hook takes no lock.
#pragma once

#include <string>

#include "model/run.h"

namespace torchneck {

struct TracerOptions {
  bool builtins = true;  // profile C functions too, as cProfile does
  // Completed calls kept per thread for the timeline (Run::py_frames), while
  // the step window is open; 0: no timeline.
  // The same window as the operator timeline, so that the flame graph and
  // trace.json find every operator's Python caller (an earlier cut at a few
  // steps left the operators of later steps, and the outer frames that
  // return only at the end, without Python frames).
  size_t timeline_events_per_thread = size_t{1} << 19;
};

// Caller holds the GIL. Hooks the calling thread, every existing thread, and
// (through threading.setprofile) threads started later.
bool start_tracer(const TracerOptions& options, std::string* error);
// Caller holds the GIL. Unhooks every thread.
void stop_tracer();
// Caller holds the GIL. Fills run.python with the merged per-thread stats,
// and run.py_frames / run.dropped_py_frames with the timeline window.
void collect_tracer(Run& run);
// Caller holds the GIL (the hook only runs with it). The statistics of the
// calls completed so far, without unhooking or clearing (periodic spills).
void snapshot_tracer(Run& run);

}  // namespace torchneck
