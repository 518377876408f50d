// Garbage collections of the interpreter: a C function appended to
// gc.callbacks at start and removed at stop. Each collection calls it twice
// ("start", "stop"); it reads the monotonic clock of OpEvent (core/clock.h)
// and writes into a preallocated list, with totals for every collection.
#pragma once

#include <cstddef>
#include <string>

#include "model/run.h"

namespace torchneck {

struct GcPauseOptions {
  size_t max_pauses = 16384;  // kept in Run::gc_pauses (32 bytes each); totals count all
};

// Caller holds the GIL. False with *error set when gc.callbacks cannot be
// reached.
bool start_gc_pauses(const GcPauseOptions& options, std::string* error);
// Caller holds the GIL: removes the callback.
void stop_gc_pauses();
// Caller holds the GIL: run.gc_pauses, run.gc, run.gc_observed; clears.
void collect_gc_pauses(Run& run);
// Caller holds the GIL: the same without clearing (periodic spills).
void snapshot_gc_pauses(Run& run);

}  // namespace torchneck
