// The operator collector: a global RecordFunction observer (DESIGN.md §4).
// This header has no torch include; only op_observer.cc sees ATen.
#pragma once

#include <cstddef>
#include <string>

#include "model/run.h"

namespace torchneck {

struct OpObserverOptions {
  // Timeline window: completed events kept per thread; beyond it events are
  // only aggregated, and counted in Run::dropped_events.
  size_t timeline_events_per_thread = size_t{1} << 19;
  // Fraction of operator events whose input shapes/dtypes are read (a second,
  // sampled callback with needsInputs, so unsampled events box nothing).
  double shape_sample_prob = 0.05;
  // Distinct shape signatures kept per operator and thread.
  size_t max_shapes_per_op = 8;
};

// Installs the observer. Returns false and sets *error when it cannot.
bool start_op_observer(const OpObserverOptions& options, std::string* error);

// Removes the observer; events already in flight finish into their buffers.
void stop_op_observer();

// After stop: merges every thread's aggregates into run.ops (one entry per
// name and kind), appends the timeline window to run.timeline (sorted by
// start), and adds the events that did not fit to run.dropped_events.
void collect_op_observer(Run& run);

}  // namespace torchneck
