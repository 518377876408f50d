// The Python sampler: a native thread that, at a fixed rate, takes the GIL
// and reads every Python thread's frame stack. No signal handler, no Python
// code runs; a thread blocked in C (a torch op, a sleep) is sampled at the
// Python line that called it, since that thread does not hold the GIL.
#pragma once

#include <string>

#include "model/run.h"

namespace torchneck {

struct SamplerOptions {
  double hz = 200.0;  // at least 100 (issue 2); 200 keeps ~5 ms resolution
  // The sampler's timeline (Run::samples): at most this many thread samples,
  // all threads together, and only while the timeline window is open
  // (core/timeline_window.h); later ones are counted in dropped_samples.
  size_t timeline_samples = size_t{1} << 19;
};

// Caller holds the GIL.
bool start_sampler(const SamplerOptions& options, std::string* error);
// Caller holds the GIL; it is released while the sampler thread is joined.
void stop_sampler();
// Caller holds the GIL. Fills run.python (self/total samples and time per
// function), run.stacks, run.python_samples, and the timeline window
// run.samples / run.dropped_samples (stack indices point into run.stacks as
// sorted here).
void collect_sampler(Run& run);
// Caller holds the GIL. The same as collect_sampler while the sampler runs,
// without stopping or clearing it (periodic spills).
void snapshot_sampler(Run& run);

}  // namespace torchneck
