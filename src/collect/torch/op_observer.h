// The operator collector: a global RecordFunction observer (docs/architecture.md, "Facts the collectors rely on").
// This header has no torch include; only op_observer*.cc (through
// op_observer_state.h) see ATen.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/detail_window.h"
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
  // --detail=window (true): operators, backward nodes and shapes only in
  // detail windows (core/detail_window.h), user scopes throughout;
  // --detail=full (false): everything throughout.
  bool detail_windows = false;
  DetailPolicyOptions detail;
};

// Installs the observer. Returns false and sets *error when it cannot.
// Data left from an earlier session that was never collected is discarded.
bool start_op_observer(const OpObserverOptions& options, std::string* error);

// Removes the observer and waits until no thread is inside one of its
// callbacks. Events that completed before stop are in their buffers; an event
// still open at stop is not recorded (collect counts such events in a note).
void stop_op_observer();

// After stop: merges every thread's aggregates into run.ops (one entry per
// name and kind), appends the timeline window to run.timeline (sorted by
// start), and adds the events that did not fit to run.dropped_events.
// Stops the observer first if it is still running, and clears every thread's
// data afterwards, so the next session starts clean.
//
// What the records mean:
// - OpStats::shapes counts *sampled* events (about shape_sample_prob of the
//   FUNCTION-scope calls), not calls. A signature is "[shape, ...] dtype,..."
//   e.g. "[[8, 3, 16, 16], [8, 3, 3, 3], [8], int[2], bool] float,float,float":
//   tensors by shape, tensor lists nested, other inputs by type only. Distinct
//   signatures past max_shapes_per_op (per op and thread, and again after the
//   merge) are counted under "(other)".
// - OpEvent::forward_tid is in RecordFunction's logical thread-id space: for
//   a backward node, the thread that ran its forward op (forwardThreadId());
//   for every other event, its own thread (threadId()). A backward node
//   matches the latest-starting forward op with the same (forward_tid, seq_nr).
void collect_op_observer(Run& run);

// While the observer runs (periodic spills, or a fatal signal on another
// thread): copies every thread's aggregates and timeline window so far into
// run, without stopping or clearing anything. Each thread is held at its
// next callback only while its aggregates are copied (microseconds); the
// timeline is copied after it is let go. Waits at most wait_ns for a thread
// that is inside a callback (a thread that crashed inside one never leaves),
// and leaves such a thread out with a note. Returns false when the observer
// is not running or its registry could not be had within wait_ns.
bool snapshot_op_observer(Run& run, int64_t wait_ns);

// A user scope through torch's RecordFunction, so that every observer sees
// it (ours, torch.profiler's): open returns a handle for close, which must
// be called on the same thread. Unlike Python's record_function, it makes
// no tensor (torch 1.13's makes one per scope, three operators). Ours is
// recorded by begin_user_scope, as Python's are.
void* open_user_scope(const char* name);
void close_user_scope(void* scope);

// A user scope recorded without a RecordFunction callback, on the calling
// thread, from now until end_user_scope(key) on the same thread: the same
// event, step boundary, fetch and detail switch the callback would make.
// Returns 0 (nothing to end) when the observer is off. The scope's own
// RecordFunction, started and ended each between
// skip_user_scope_callbacks(true) and (false) on this thread, is then left
// to other observers.
uint64_t begin_user_scope(std::string_view name);
void end_user_scope(uint64_t key);
void skip_user_scope_callbacks(bool on);

// Every Python record_function scope is recorded by begin_user_scope
// (collect/python/record_function_scopes.h): the light callback, registered
// for user scopes outside windows, is removed, and the detail callbacks take
// the other user scopes in windows. false: the light callback is back.
void python_scopes_covered(bool covered);

// A running observer's detail windows follow a rank's fixed schedule from
// the next step boundary on (DetailPolicy::set_lockstep): the process has
// joined a process group of more than one rank. Nothing without windows.
void detail_lockstep(int64_t period);

// Events (operators, backward nodes, user scopes) every thread has ended
// so far, in and out of sessions: the GPU window sizes itself by the
// difference over a step (python/torchneck/gpu_window.py). Takes the
// registry lock; once per step at most.
uint64_t op_observer_events_ended();

// Stops the observer and drops every thread's data without merging it (a
// forked DataLoader worker drops what it inherited from its parent).
void discard_op_observer();

}  // namespace torchneck
