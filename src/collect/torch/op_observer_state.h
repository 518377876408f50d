// The operator collector's shared state (op_observer.h): what its
// RecordFunction callbacks (op_observer.cc, the hot path) write per thread
// and what snapshot and collect (op_observer_collect.cc) read under the
// observer's lock. Internal to those two files; includes ATen.
#pragma once

// libtorch is built with NDEBUG, and RecordFunction's inline inputs()
// asserts on a member that exists only in debug builds: without NDEBUG here
// it reads padding and throws. See the torch headers as libtorch saw them.
#ifndef NDEBUG
#define NDEBUG
#define TORCHNECK_RESTORE_DEBUG
#endif
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/ScalarType.h>
#ifdef TORCHNECK_RESTORE_DEBUG
#undef NDEBUG
#undef TORCHNECK_RESTORE_DEBUG
#endif

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "collect/system/thinned_series.h"
#include "collect/system/thread_clock.h"
#include "collect/torch/op_observer.h"
#include "core/detail_window.h"
#include "core/event_buffer.h"
#include "core/interner.h"
#include "core/side_arena.h"
#include "model/collectives.h"
#include "model/run.h"

namespace torchneck::op_observer_detail {

constexpr size_t kStackReserve = 128;       // nesting depth without allocation
constexpr size_t kAggSlots = 64;            // initial (name, kind) table size
constexpr size_t kMaxSignatureInputs = 16;  // inputs described per signature
constexpr size_t kMaxSignatureChars = 320;  // longer signatures end in "..."
constexpr size_t kMaxListElements = 4;      // tensors shown per tensor list
// Signatures beyond max_shapes_per_op distinct ones (per op and thread) are
// counted under kOtherShapes (model/op_merge.h) instead of being kept.

// One open RecordFunction on this thread.
struct Frame {
  int64_t start_ns;
  int64_t child_ns;  // total time of completed children on this thread
  int64_t seq_nr;
  uint64_t forward_tid;
  uint64_t key;      // see frame_key()
  uint32_t name_id;
  uint32_t agg;      // index into ThreadState::aggs
  OpKind kind;
  int64_t cpu_start_ns;  // DataLoader fetches only: the thread's CPU clock at start
  int64_t runqueue_start_ns;  // and its wait for a CPU so far (schedstat)
};

// A distinct signature of an op on a thread; its text lives in the thread's
// SideArena (core/side_arena.h: signatures arrive over the whole run and
// must stay out of the script's malloc heap).
struct ShapeSlot {
  uint64_t hash;
  const char* text;
  uint32_t size;
  uint64_t count;
  std::string_view view() const { return {text, size}; }
};

struct OpAggregate {
  uint32_t name_id;
  OpKind kind;
  uint64_t calls = 0;
  int64_t self_ns = 0;
  int64_t total_ns = 0;
  // max_shapes_per_op slots in the thread's SideArena, taken at the first
  // signature; shape_count of them used.
  ShapeSlot* shapes = nullptr;
  uint32_t shape_count = 0;
  uint64_t other_shapes = 0;
};

struct AggSlot {
  uint64_t key = 0;  // agg_key(); 0 = empty
  uint32_t index = 0;
};

inline uint64_t agg_key(uint32_t name_id, OpKind kind) {
  return ((uint64_t{name_id} << 8) | static_cast<uint8_t>(kind)) + 1;
}

struct ThreadState {
  ThreadState(uint32_t index, size_t timeline_capacity)
      : thread_index(index), agg_slots(kAggSlots), timeline(timeline_capacity) {
    stack.reserve(kStackReserve);
    shape_text.reserve(kMaxSignatureChars + 64);
    dtype_text.reserve(128);
  }

  // Raised while this thread runs one of our callbacks; stop waits for it.
  std::atomic<uint32_t> busy{0};
  // Raised by a snapshot (periodic spill) while it reads this thread's
  // aggregates; the thread waits at its next callback until it is lowered.
  std::atomic<uint32_t> frozen{0};
  // Events this thread ended (every kind, detail windows or not): written
  // by this thread only, read by op_observer_events_ended() on another
  // (relaxed: a plain add on x86, no lock prefix). Never reset.
  std::atomic<uint64_t> events_ended{0};
  const uint32_t thread_index;
  InternCache names;
  std::vector<Frame> stack;
  // (name_id, kind) -> index into aggs: open addressing, sized by the ops
  // this thread has seen (not by the global id range, which the Python
  // collectors grow), rebuilt from aggs when half full.
  std::vector<AggSlot> agg_slots;
  std::vector<OpAggregate> aggs;
  EventBuffer<OpEvent> timeline;
  uint64_t abandoned = 0;  // frames whose end never came on this thread
  // name id -> 1 if its end is a step boundary (timeline_window.h), 0 if
  // not, 2 if not classified yet; grows only when a new name is seen.
  std::vector<uint8_t> boundary_of;
  // name id -> 1 if it is a DataLoader fetch, as boundary_of; and the
  // fetches' wall time, CPU time and run-queue wait on this thread
  // (Run::data_wait_ns).
  std::vector<uint8_t> fetch_of;
  // name id -> what it is to the collectives (kNotCollective, kCollectiveWork,
  // kCollectiveOp, kUnclassified), as boundary_of.
  std::vector<uint8_t> collective_of;
  int64_t fetch_ns = 0;
  int64_t fetch_cpu_ns = 0;
  int64_t fetch_runqueue_ns = 0;
  // This thread's clocks at each step boundary it ended (Run::step_clocks),
  // made at its first one: most threads never end a step.
  std::unique_ptr<ThinnedSeries<StepClock>> step_clocks;
  // Its last one, kept whatever the thinning: the run's end in steps.
  StepClock last_clock;
  // This thread's /proc/thread-self/schedstat, opened at its first step
  // boundary (read_thread_clocks); -1 again in a forked child (op_observer.cc).
  int schedstat_fd = -1;
  // Scratch for the sampled shape callback, reused across events.
  std::string shape_text;
  std::string dtype_text;
  // The shape slots and signature texts (ShapeSlot), until reset_thread.
  SideArena side;
};

// c10d collectives (model/collectives.h): the dispatcher op that marks a
// rank's arrival ("c10d::allreduce_", recorded at its end on the issuing
// thread) and the process group's asynchronous Work that completes it
// ("gloo:all_reduce", started and ended on the backend's threads). A few per
// step, the Work's two ends on different threads from the op's, so they
// live apart from the per-thread stacks, in fixed arrays claimed with
// atomics. A cell is zero until it is filled; start_ns is written last
// (release), so a snapshot that reads it non-zero (acquire) reads a whole
// cell.
constexpr size_t kMaxCollectives = size_t{1} << 17;  // pieces kept per session (5 MiB, touched as used)
constexpr size_t kCollectiveSlots = 1024;            // Works in flight at once (DDP: one per bucket)

struct CollectiveCell {
  std::atomic<int64_t> start_ns;
  std::atomic<int64_t> end_ns;  // 0 while in flight
  int64_t bytes;
  uint32_t name_id;
  uint32_t thread_index;
  uint8_t is_op;  // 1: the dispatcher op (arrival), 0: the Work (completion)
};

struct CollectiveSlot {
  std::atomic<uint64_t> key;  // frame_key() of its RecordFunction, 0 when free
  std::atomic<uint32_t> cell;
};

struct Collectives {
  CollectiveCell* cells = nullptr;  // kMaxCollectives, zeroed pages (calloc), never freed
  CollectiveSlot* slots = nullptr;  // kCollectiveSlots
  std::atomic<uint64_t> next{0};    // cells claimed (may pass kMaxCollectives: those are dropped)
  std::atomic<uint64_t> untracked{0};  // Works started while every slot was taken: their end is unknown
};

// Step clocks kept per thread: a run's boundaries up to this, then every
// 2nd, 4th, ... (thinned_series.h): 128 KiB on the thread that steps.
constexpr size_t kStepClocks = 4096;
// The share of a thread's timeline (--timeline-events) kept for the light
// steps: once the detail windows have filled the rest, no window opens
// again (DetailPolicy::stop_opening). A light step adds ~5 events (its
// optimizer step, fetch, backward and the script's scopes), a detailed one
// an event per operator (makemore: ~16,000): without the reserve, windows
// filled makemore's timeline by step 297 of 501, and the steps after it
// lost their step times, breakdown and slow-step analysis, not only their
// operators. A quarter of the default 2^19 events keeps ~25,000 light steps.
constexpr size_t kLightReserveDivisor = 4;

// Whether this thread's timeline has room for more detailed steps. With no
// timeline at all (--timeline-events=0: aggregates only) there is nothing
// to keep room in, and the windows go on feeding the aggregates.
inline bool room_for_detail(const ThreadState* st) {
  const size_t capacity = st->timeline.capacity();
  return capacity == 0 || st->timeline.size() < capacity - capacity / kLightReserveDivisor;
}

// clock_reads_inside: a thread's CPU clock is read by a system call, and on
// a host whose cores are all busy the scheduler takes the core back at
// such a call far more often than in the same stretch of Python (the
// thread waits a time slice there). So each read is made inside the
// interval it bounds, after its start and before its end are taken:
// that wait falls in the fetch or the step it measures, where the script's
// own clock has it, not in the gap after it ("other").

// A step is ending on this thread: its clocks (thread_clock.h), once per
// step, a few microseconds, read before the step's end is taken
// (clock_reads_inside); stamp_step_clock gives them that end. Allocates
// once, at the thread's first.
inline void record_step_clock(ThreadState* st) {
  if (!st->step_clocks) st->step_clocks = std::make_unique<ThinnedSeries<StepClock>>(kStepClocks);
  const ThreadClocks c = read_thread_clocks(&st->schedstat_fd);
  st->last_clock = StepClock{0, c.cpu_ns, c.runqueue_ns, st->thread_index, st->last_clock.step + 1, 0};
}

inline void stamp_step_clock(ThreadState* st, int64_t end_ns) {
  st->last_clock.t_ns = end_ns;
  st->last_clock.data_ns = st->fetch_ns;
  st->step_clocks->tick(st->last_clock);
}

struct Observer {
  Collectives collectives;
  std::mutex mu;  // registration (once per thread), start, stop, collect
  std::vector<std::unique_ptr<ThreadState>> threads;
  OpObserverOptions options;
  // user scopes: always on while the observer runs, unless python_scopes
  at::CallbackHandle light_handle = at::INVALID_CALLBACK_HANDLE;
  // operators, backward nodes, TorchScript (and user scopes with
  // python_scopes): on in detail windows only
  at::CallbackHandle main_handle = at::INVALID_CALLBACK_HANDLE;
  at::CallbackHandle shape_handle = at::INVALID_CALLBACK_HANDLE;
  bool installed = false;
  // Python's user scopes are recorded by begin_user_scope (python_scopes_covered).
  bool python_scopes = false;
  // Detail windows (core/detail_window.h): the policy, fed at each step
  // boundary by the thread that ends it, and the spans detail was on, under
  // detail_mu (taken once per step boundary, and by stop and collect).
  std::mutex detail_mu;
  DetailPolicy policy;
  bool detail_on = true;  // main_handle and shape_handle are enabled
  int64_t detail_since_ns = 0;
  // The boundary scope's name that paces the policy: the first one seen.
  // With two optimizers stepped per iteration (Adam.step, then SGD.step),
  // the policy counts iterations, not optimizer calls.
  uint32_t detail_pace_name = UINT32_MAX;
  std::vector<std::pair<int64_t, int64_t>> detail_spans;  // closed spans
};

// The one observer (leaked: late callbacks may still look).
Observer& observer();
// Removes the callbacks and waits until no thread is inside one. With
// observer().mu held.
void stop_locked(Observer& o);
// The detail spans so far, the one still open ending at now_ns (-1: still
// open is left out).
std::vector<std::pair<int64_t, int64_t>> detail_spans_of(Observer& o, int64_t now_ns);
enum : uint8_t { kNotCollective = 0, kCollectiveWork = 1, kUnclassified = 2, kCollectiveOp = 3 };

// What a name is to the collectives, classified once per name and thread:
// a backend's Work ("gloo:all_reduce"), a collective's dispatcher op
// ("c10d::allreduce_"), or neither (model/collectives.h).
inline uint8_t collective_class(ThreadState* st, uint32_t name_id) {
  if (name_id >= st->collective_of.size()) st->collective_of.resize(name_id + 64, kUnclassified);
  uint8_t& b = st->collective_of[name_id];
  if (b == kUnclassified) {
    const std::string_view n = StringInterner::global().lookup(name_id);
    b = !collective_kind_of_work(n).empty() ? kCollectiveWork
        : !collective_kind_of_op(n).empty() ? kCollectiveOp
                                            : kNotCollective;
  }
  return b;
}

// Identifies a RecordFunction between its start and end callbacks. handle()
// is only assigned when some callback asked for ids (needsIds: an atomic
// counter shared by all threads, which we avoid); otherwise the object's
// address, unique while it is alive, serves. Stale frames with a reused
// address sit lower on the stack, and the search runs from the top.
inline uint64_t frame_key(const at::RecordFunction& fn) {
  const uint64_t handle = fn.handle();
  return handle != 0 ? handle : reinterpret_cast<uintptr_t>(&fn);
}

// op_observer_collectives.cc, called from the callbacks: a collective's
// dispatcher op ended (the arrival, from frame F's start), a backend's Work
// started or ended.
void record_arrival(ThreadState* st, const Frame& f, int64_t end_ns);
void start_collective(ThreadState* st, const at::RecordFunction& fn);
void end_collective(const at::RecordFunction& fn, int64_t end_ns);

// op_observer_shapes.cc, called from the shape callback: builds the
// signature of FN's inputs, "[[32, 3, 32, 32], [16], int] float,float"
// (shapes, other values as their type, then the tensors' dtypes), into
// st->shape_text. Throws what torch throws for a tensor without sizes.
void build_signature(ThreadState* st, const at::RecordFunction& fn);

// The pieces recorded so far (safe while the observer runs): the ops and
// the Works, and how many did not fit.
void copy_collectives(const Collectives& c, std::vector<CollectivePiece>& ops, std::vector<CollectivePiece>& works,
                      uint64_t* dropped);
// Empties the collectives' cells for the next session (no callback running).
void reset_collectives(Collectives& c);
// Empties a thread's data for the next session.
void reset_thread(ThreadState& st, size_t timeline_capacity);

}  // namespace torchneck::op_observer_detail
