// One collector of a live run (the Python sampler or tracer, nn.Module
// scopes, the torch operator observer; later a GPU window, NVML, collectives)
// behind the shape Kineto gives its profilers: configure (the constructor,
// from options) → start → stop → collect into the Run. A session
// (src/bindings/module.cc) holds a list of them, chosen once from its
// options, and drives every one the same way: adding a collector adds one
// implementation, not a branch in every method of the session.
//
// The order the session keeps, and why:
// - start() in list order, stop() in the reverse order. The list puts the
//   Python collectors last: started last and stopped first, they never see
//   the Python calls the other collectors make to install or remove their
//   hooks (stop_module_scopes calls handle.remove()).
// - A collector whose start() fails either ends the session's start (the
//   ones already started are stopped again) or, when !required(), becomes a
//   note in the report and is left out of the list (the rest of the profile
//   stands).
// - snapshot() and collect() run with the GIL held for a python_side()
//   collector, and without it for the others: the spill thread takes the
//   Python snapshots under the GIL and the native ones without it (a crashing
//   thread may hold the GIL forever); collect() releases the GIL before the
//   native collectors, so that a thread waiting for the GIL can leave an
//   operator callback.
// - The spiller is stopped before any collector (it calls their snapshots).
#pragma once

#include <cstdint>
#include <string>

#include "model/run.h"

namespace torchneck {

class Collector {
 public:
  virtual ~Collector() = default;

  // What the collector is, in the report's words ("operator observer"): the
  // note that a snapshot could not be taken starts with it.
  virtual const char* name() const = 0;

  // Whether a start failure ends the session (true), or only leaves this
  // collector's part out of the report, with a note (false).
  virtual bool required() const { return true; }

  // Whether snapshot() and collect() need the GIL (true), or must run
  // without it (false).
  virtual bool python_side() const = 0;

  // The GIL is held. Returns false with *error set when it cannot start.
  virtual bool start(std::string* error) = 0;

  // The GIL is held (a collector may release it while it joins a thread).
  // After it returns, nothing more is recorded.
  virtual void stop() = 0;

  // While it runs (periodic spills, a fatal signal on another thread): adds
  // what it has so far to run, without stopping or clearing anything. A
  // native collector waits at most wait_ns for a thread inside one of its
  // callbacks; returns false when no snapshot could be taken.
  virtual bool snapshot(Run& run, int64_t wait_ns) = 0;

  // After stop(): moves what it recorded into run and clears its data, so a
  // next session starts clean.
  virtual void collect(Run& run) = 0;

  // In a forked child (a DataLoader worker under fork), the GIL held: stops
  // and drops what the parent had recorded, so the child can profile itself.
  virtual void discard() = 0;
};

}  // namespace torchneck
