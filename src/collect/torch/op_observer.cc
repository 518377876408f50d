// The operator collector: global RecordFunction callbacks (docs/architecture.md, "Facts the collectors rely on").
//
//   main   FUNCTION, BACKWARD_FUNCTION, TORCHSCRIPT_FUNCTION, USER_SCOPE; no
//          inputs. Start pushes a frame on the thread's own stack, end pops it
//          and adds (calls, self, total) to the thread's aggregate for the op,
//          and appends an OpEvent to the thread's bounded timeline.
//   shapes FUNCTION only, sampled (shape_sample_prob), needsInputs: reads the
//          input shapes and dtypes into a short signature, counted per op.
//
// With --detail=window both are registered in detail windows only
// (core/detail_window.h; any callback wanting operators costs ~0.2 us an
// operator). User scopes are recorded for the whole run: Python's
// record_function and open_user_scope's by begin_user_scope, with no
// callback (collect/python/record_function_scopes.h); without that
// collector, by a light callback (main's, USER_SCOPE only), always on.
//
// Hot path rules (docs/architecture.md): no lock, no allocation in steady state, no
// ObserverContext (start callbacks return nullptr), names interned through a
// per-thread InternCache. Allocation happens only when a thread sees its
// first event or a new name, when the stack outgrows its reserve, or once
// per EventBuffer chunk. A new shape signature (sampled, bounded) keeps its
// text in the thread's SideArena (core/side_arena.h), outside malloc's heap.
//
// Per-thread state is owned by a registry and never freed, so it outlives
// the thread (autograd engine threads, DataLoader pin-memory threads) and a
// thread's cached pointer to it can never dangle.
//
// Session safety: a global flag turns the callbacks off at stop; each thread
// raises its own `busy` flag around its work (Dekker-style, seq_cst on both
// sides), and stop waits until no thread is inside a callback, so collect
// reads and clears the per-thread data without racing a late callback.
// Consequence: an event still open when the observer stops is not recorded.
#include "collect/torch/op_observer.h"

#include "collect/torch/op_observer_state.h"  // first: ATen under NDEBUG

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/event_buffer.h"
#include "core/interner.h"
#include "core/threads.h"
#include "core/timeline_window.h"
#include "model/collectives.h"
#include "model/op_merge.h"

namespace torchneck {
namespace op_observer_detail {

namespace {
void lock_observer() {
  observer().mu.lock();
  observer().detail_mu.lock();  // the order stop and collect take them in
}
void unlock_observer() {
  observer().detail_mu.unlock();
  observer().mu.unlock();
}
// A forked child closes the parent's threads' schedstat files (thread_clock.h).
void unlock_observer_in_child() {
  for (const auto& st : observer().threads) {
    if (st->schedstat_fd >= 0) ::close(st->schedstat_fd);
    st->schedstat_fd = -1;
  }
  unlock_observer();
}
}  // namespace

Observer& observer() {
  static auto* o = [] {
    auto* obs = new Observer();  // leaked: late callbacks may still look
    // fork() (a DataLoader worker) while a snapshot or a registration holds
    // the lock would leave it locked in the child. Registered after the
    // thread registry's and the interner's handlers (prepare handlers run in
    // reverse order), so fork takes this lock first and theirs after it: the
    // order in which register_thread() and a snapshot take them.
    (void)current_thread_index();
    (void)StringInterner::global();
    pthread_atfork(&lock_observer, &unlock_observer, &unlock_observer_in_child);
    return obs;
  }();
  return *o;
}

namespace {

std::atomic<bool> g_enabled{false};
thread_local ThreadState* t_state = nullptr;
// Raised around the start and the end of the RecordFunction of a scope
// begin_user_scope records (record_function, open_user_scope): the callbacks
// skip both (an end searching the stack could match a stale frame).
thread_local bool t_skip_user_scope = false;

ThreadState* register_thread() {
  const uint32_t index = current_thread_index();
  Observer& o = observer();
  std::lock_guard<std::mutex> lock(o.mu);
  o.threads.push_back(
      std::make_unique<ThreadState>(index, o.options.timeline_events_per_thread));
  return o.threads.back().get();
}

// Returns the thread's state with `busy` raised, or nullptr when the observer
// is off. Every non-null return must be paired with leave().
inline ThreadState* enter() {
  if (!g_enabled.load(std::memory_order_relaxed)) return nullptr;
  ThreadState* st = t_state;
  if (st == nullptr) st = t_state = register_thread();
  for (;;) {
    st->busy.store(1, std::memory_order_seq_cst);
    if (!g_enabled.load(std::memory_order_seq_cst)) {
      st->busy.store(0, std::memory_order_release);
      return nullptr;
    }
    // A snapshot is reading this thread's state (a few microseconds, once
    // per spill): step back and wait. The same Dekker pairing as stop.
    if (st->frozen.load(std::memory_order_seq_cst) == 0) return st;
    st->busy.store(0, std::memory_order_release);
    while (st->frozen.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  }
}

inline void leave(ThreadState* st) {
  st->busy.store(0, std::memory_order_release);
}

inline OpKind kind_of(at::RecordScope scope) {
  switch (scope) {
    case at::RecordScope::BACKWARD_FUNCTION: return OpKind::kBackward;
    case at::RecordScope::USER_SCOPE: return OpKind::kUserScope;
    case at::RecordScope::TORCHSCRIPT_FUNCTION: return OpKind::kTorchScript;
    default: return OpKind::kOperator;
  }
}

// frame_key(): op_observer_state.h.

inline size_t agg_slot_start(uint64_t key, size_t mask) {
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 32) & mask;
}

void rebuild_agg_slots(ThreadState* st, size_t size) {
  st->agg_slots.assign(size, AggSlot{});
  const size_t mask = size - 1;
  for (size_t a = 0; a < st->aggs.size(); ++a) {
    const uint64_t key = agg_key(st->aggs[a].name_id, st->aggs[a].kind);
    size_t i = agg_slot_start(key, mask);
    while (st->agg_slots[i].key != 0) i = (i + 1) & mask;
    st->agg_slots[i] = AggSlot{key, static_cast<uint32_t>(a)};
  }
}

// The thread's aggregate for (name, kind); allocates only for a new pair.
inline uint32_t aggregate_for(ThreadState* st, uint32_t name_id, OpKind kind) {
  const uint64_t key = agg_key(name_id, kind);
  const size_t mask = st->agg_slots.size() - 1;
  size_t i = agg_slot_start(key, mask);
  for (;; i = (i + 1) & mask) {
    const AggSlot& slot = st->agg_slots[i];
    if (slot.key == key) return slot.index;
    if (slot.key == 0) break;
  }
  const auto index = static_cast<uint32_t>(st->aggs.size());
  OpAggregate agg;
  agg.name_id = name_id;
  agg.kind = kind;
  st->aggs.push_back(std::move(agg));
  if (st->aggs.size() * 2 > st->agg_slots.size()) {
    rebuild_agg_slots(st, st->agg_slots.size() * 2);  // inserts the new one too
  } else {
    st->agg_slots[i] = AggSlot{key, index};
  }
  return index;
}

// Whether the end of `name_id` is a step boundary; classifies each name once
// per thread.
inline bool is_boundary(ThreadState* st, uint32_t name_id) {
  if (name_id >= st->boundary_of.size()) st->boundary_of.resize(name_id + 64, 2);
  uint8_t& b = st->boundary_of[name_id];
  if (b == 2) b = is_step_boundary_name(StringInterner::global().lookup(name_id)) ? 1 : 0;
  return b == 1;
}

// DataLoader __next__ (a user scope), cached per name id as is_boundary.
inline bool is_fetch(ThreadState* st, uint32_t name_id) {
  if (name_id >= st->fetch_of.size()) st->fetch_of.resize(name_id + 64, 2);
  uint8_t& b = st->fetch_of[name_id];
  if (b == 2) b = StringInterner::global().lookup(name_id).rfind("enumerate(DataLoader)", 0) == 0 ? 1 : 0;
  return b == 1;
}

// (A fetch's CPU time, thread_cpu_ns, is read at its two ends only.)
// The detail callbacks are added at a window's start and removed at its
// end, not disabled: torch copies the global callback list, disabled entries
// too, each time a thread's RecordFunction state is restored (twice per
// autograd node; docs/overhead.md). With o.detail_mu held (or before the
// observer is shared).
std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn);
void on_end(const at::RecordFunction& fn, at::ObserverContext*);
std::unique_ptr<at::ObserverContext> on_shapes(const at::RecordFunction& fn);
void on_shapes_end(const at::RecordFunction&, at::ObserverContext*);

// With o.python_scopes, main takes the user scopes not recorded without a
// callback (c10d Works, C++ scopes) in windows only; without, the light
// callback takes them all throughout.
void add_detail_callbacks(Observer& o) {
  std::unordered_set<at::RecordScope, std::hash<at::RecordScope>> scopes{
      at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION, at::RecordScope::TORCHSCRIPT_FUNCTION};
  if (o.python_scopes) scopes.insert(at::RecordScope::USER_SCOPE);
  o.main_handle = at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end).scopes(scopes));
  if (o.options.shape_sample_prob > 0.0 && o.options.max_shapes_per_op > 0) {
    o.shape_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_shapes, &on_shapes_end)
            .needsInputs(true)
            .samplingProb(o.options.shape_sample_prob)
            .scopes({at::RecordScope::FUNCTION}));
  }
}

void add_light_callback(Observer& o) {
  o.light_handle = at::addGlobalCallback(
      at::RecordFunctionCallback(&on_start, &on_end).scopes({at::RecordScope::USER_SCOPE}));
}

void remove_all_callbacks(Observer& o) {
  for (at::CallbackHandle h : {o.light_handle, o.main_handle, o.shape_handle})
    if (h != at::INVALID_CALLBACK_HANDLE) at::removeCallback(h);
  o.light_handle = o.main_handle = o.shape_handle = at::INVALID_CALLBACK_HANDLE;
}

void remove_detail_callbacks(Observer& o) {
  for (at::CallbackHandle h : {o.main_handle, o.shape_handle})
    if (h != at::INVALID_CALLBACK_HANDLE) at::removeCallback(h);
  o.main_handle = o.shape_handle = at::INVALID_CALLBACK_HANDLE;
}

// The detail callbacks were switched ON or off at t_ns: the windows' spans,
// the flag the collectors read, and the module scopes told (a pending call).
void detail_switched(Observer& o, bool on, int64_t t_ns) {
  if (on) o.detail_since_ns = t_ns;
  else o.detail_spans.emplace_back(o.detail_since_ns, t_ns);
  o.detail_on = on;
  detail_window().on.store(on, std::memory_order_relaxed);
  if (void (*changed)() = detail_window().on_change.load(std::memory_order_acquire)) changed();
}

// A step ended: the detail policy decides whether the next one is
// detailed, and the detail callbacks are switched to match. Once per step.
// ROOM: whether the ending thread's timeline has room for more detail.
void detail_boundary(int64_t end_ns, uint32_t name_id, bool room) {
  Observer& o = observer();
  if (!o.options.detail_windows) return;  // written at start only, as the other options
  std::lock_guard<std::mutex> lock(o.detail_mu);
  if (!g_enabled.load(std::memory_order_relaxed)) return;  // stop removed the callbacks
  // ProfilerStep#N is one scope per iteration, a new name each time.
  if (StringInterner::global().lookup(name_id).rfind("ProfilerStep#", 0) != 0) {
    if (o.detail_pace_name == UINT32_MAX) o.detail_pace_name = name_id;
    if (name_id != o.detail_pace_name) return;
  }
  if (!room) o.policy.stop_opening();
  const bool on = o.policy.on_boundary(end_ns, detail_window().held.load(std::memory_order_relaxed)) ||
                  detail_window().keep_on.load(std::memory_order_relaxed);
  if (on == o.detail_on) return;
  try {
    if (on) add_detail_callbacks(o);
    else remove_detail_callbacks(o);
  } catch (const std::exception&) {  // torch refused: the run stays light, never broken
    remove_detail_callbacks(o);
    return;
  }
  detail_switched(o, on, end_ns);
}

// Pushes a frame for an event starting now on this thread.
void push_frame(ThreadState* st, OpKind kind, uint32_t name_id, uint64_t key, int64_t seq_nr, uint64_t forward_tid) {
  Frame f;
  f.kind = kind;
  f.name_id = name_id;
  f.agg = aggregate_for(st, f.name_id, f.kind);
  f.key = key;
  f.seq_nr = seq_nr;
  f.forward_tid = forward_tid;
  f.child_ns = 0;
  const bool fetch = f.kind == OpKind::kUserScope && is_fetch(st, f.name_id);
  f.cpu_start_ns = -1;
  f.runqueue_start_ns = 0;
  st->stack.push_back(f);
  st->stack.back().start_ns = now_ns();  // last: our own work is not the op's
  // After the start: see clock_reads_inside.
  if (fetch) {
    st->stack.back().cpu_start_ns = thread_cpu_ns();
    st->stack.back().runqueue_start_ns = read_thread_clocks(&st->schedstat_fd).runqueue_ns;
  }
}

// Ends the frame `key` of this thread at end_ns (taken again after the
// clock reads of a fetch's or a step's end: clock_reads_inside): its
// aggregate, its event, and the step boundary its end may be.
void pop_frame(ThreadState* st, uint64_t key, int64_t end_ns) {
  std::vector<Frame>& stack = st->stack;
  size_t i = stack.size();
  while (i > 0 && stack[i - 1].key != key) --i;
  if (i == 0) return;  // started before this session, or on another thread
  if (i < stack.size()) {  // frames above never saw their end: drop them
    st->abandoned += stack.size() - i;
    stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(i), stack.end());
  }
  const Frame f = stack.back();
  stack.pop_back();
  const bool boundary = f.kind == OpKind::kUserScope && is_boundary(st, f.name_id);
  int64_t fetch_cpu_end = -1, fetch_runqueue_end = -1;
  if (f.cpu_start_ns >= 0 || boundary) {  // before the end: see clock_reads_inside
    if (f.cpu_start_ns >= 0) {
      fetch_cpu_end = thread_cpu_ns();
      fetch_runqueue_end = read_thread_clocks(&st->schedstat_fd).runqueue_ns;
    }
    if (boundary) record_step_clock(st);
    end_ns = now_ns();
  }
  st->events_ended.store(st->events_ended.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  const int64_t total = end_ns - f.start_ns;
  const int64_t self = std::max<int64_t>(0, total - f.child_ns);
  if (!stack.empty()) stack.back().child_ns += total;

  OpAggregate& agg = st->aggs[f.agg];
  ++agg.calls;
  agg.self_ns += self;
  agg.total_ns += total;

  OpEvent ev{};
  ev.start_ns = f.start_ns;
  ev.end_ns = end_ns;
  ev.seq_nr = f.seq_nr;
  ev.forward_tid = f.forward_tid;
  ev.name_id = f.name_id;
  ev.thread_index = st->thread_index;
  ev.kind = f.kind;
  ev.depth = static_cast<uint8_t>(std::min<size_t>(stack.size(), 255));
  TimelineWindow& window = timeline_window();
  if (window.open()) st->timeline.append(ev);
  else st->timeline.drop();
  if (boundary) {
    window.boundary(end_ns);
    stamp_step_clock(st, end_ns);
    detail_boundary(end_ns, f.name_id, room_for_detail(st));
  }
  if (f.kind == OpKind::kOperator && collective_class(st, f.name_id) == kCollectiveOp) record_arrival(st, f, end_ns);
  if (f.cpu_start_ns >= 0) {
    st->fetch_ns += total;
    st->fetch_cpu_ns += fetch_cpu_end - f.cpu_start_ns;
    st->fetch_runqueue_ns += std::max<int64_t>(0, fetch_runqueue_end - f.runqueue_start_ns);
  }
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  const OpKind kind = kind_of(fn.scope());
  if (kind == OpKind::kUserScope && t_skip_user_scope) {  // begin_user_scope records it
    t_skip_user_scope = false;
    return nullptr;
  }
  ThreadState* st = enter();
  if (st == nullptr) return nullptr;
  if (fn.isAsync()) {  // a c10d Work: it ends on another thread, not on this stack
    start_collective(st, fn);
    leave(st);
    return nullptr;
  }
  // Backward nodes carry the id of the thread that ran their forward op;
  // every other event carries its own thread's id in the same id space
  // (RecordFunction's logical thread ids), so analysis can match a backward
  // node to the forward op with the same (forward_tid, seq_nr).
  push_frame(st, kind, st->names.intern(fn.name()), frame_key(fn), fn.seqNr(),
             kind == OpKind::kBackward ? fn.forwardThreadId() : fn.threadId());
  leave(st);
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  const int64_t end_ns = now_ns();  // first: our own work is not the op's
  if (t_skip_user_scope && fn.scope() == at::RecordScope::USER_SCOPE) {
    t_skip_user_scope = false;
    return;
  }
  ThreadState* st = enter();
  if (st == nullptr) return;
  if (fn.isAsync()) end_collective(fn, end_ns);
  else pop_frame(st, frame_key(fn), end_ns);
  leave(st);
}

// --- sampled shape signatures (built in op_observer_shapes.cc) ------------

std::unique_ptr<at::ObserverContext> on_shapes(const at::RecordFunction& fn) {
  ThreadState* st = enter();
  if (st == nullptr) return nullptr;
  try {
    build_signature(st, fn);
  } catch (...) {  // e.g. a tensor kind without sizes (nested, symbolic)
    st->shape_text.assign("?");
  }
  const uint32_t name_id = st->names.intern(fn.name());
  OpAggregate& agg = st->aggs[aggregate_for(st, name_id, OpKind::kOperator)];
  const std::string& sig = st->shape_text;
  const uint64_t hash = hash_bytes(sig.data(), sig.size());
  bool counted = false;
  for (uint32_t i = 0; i < agg.shape_count; ++i) {
    ShapeSlot& slot = agg.shapes[i];
    if (slot.hash == hash && slot.view() == std::string_view(sig)) {
      ++slot.count;
      counted = true;
      break;
    }
  }
  if (!counted) {
    // Options are only written under the registry lock while no callback
    // runs (start), so reading them here is race-free.
    const size_t max_shapes = observer().options.max_shapes_per_op;
    if (agg.shapes == nullptr && max_shapes > 0) {
      agg.shapes = static_cast<ShapeSlot*>(st->side.allocate(max_shapes * sizeof(ShapeSlot)));
    }
    const char* text = agg.shapes != nullptr && agg.shape_count < max_shapes
                           ? st->side.copy(sig.data(), sig.size())
                           : nullptr;
    if (text != nullptr) {
      agg.shapes[agg.shape_count++] = ShapeSlot{hash, text, static_cast<uint32_t>(sig.size()), 1};
    } else {
      ++agg.other_shapes;
    }
  }
  leave(st);
  return nullptr;
}

void on_shapes_end(const at::RecordFunction&, at::ObserverContext*) {}

}  // namespace

// --- session -----------------------------------------------------------------

void stop_locked(Observer& o) {
  if (!o.installed) return;
  g_enabled.store(false, std::memory_order_seq_cst);
  {
    // Not while a step boundary switches them; released before the wait
    // below, which may wait for that very thread.
    std::lock_guard<std::mutex> lock(o.detail_mu);
    remove_all_callbacks(o);
    if (o.detail_on) o.detail_spans.emplace_back(o.detail_since_ns, now_ns());
    o.detail_on = false;
  }
  // A thread that raised `busy` before seeing the flag finishes its event;
  // one that raises it later sees the flag and backs out.
  for (const auto& st : o.threads) {
    while (st->busy.load(std::memory_order_seq_cst) != 0) {
      std::this_thread::yield();
    }
  }
  o.installed = false;
}

}  // namespace op_observer_detail

using namespace op_observer_detail;  // NOLINT: this file's own state

uint64_t op_observer_events_ended() {
  Observer& o = observer();
  std::lock_guard<std::mutex> lock(o.mu);
  uint64_t n = 0;
  for (const auto& st : o.threads) n += st->events_ended.load(std::memory_order_relaxed);
  return n;
}

void detail_lockstep(int64_t period) {
  Observer& o = observer();
  if (!o.options.detail_windows || period <= 0) return;
  std::lock_guard<std::mutex> lock(o.detail_mu);
  o.policy.set_lockstep(period);
}

bool start_op_observer(const OpObserverOptions& options, std::string* error) {
  Observer& o = observer();
  std::lock_guard<std::mutex> lock(o.mu);
  auto fail = [&](std::string message) {
    if (error != nullptr) *error = std::move(message);
    return false;
  };
  if (o.installed) return fail("the operator observer is already running");
  if (!(options.shape_sample_prob >= 0.0 && options.shape_sample_prob <= 1.0)) {
    return fail("shape_sample_prob must be within [0, 1]");
  }
  o.options = options;
  for (const auto& st : o.threads) {
    reset_thread(*st, options.timeline_events_per_thread);
  }
  reset_collectives(o.collectives);
  {
    std::lock_guard<std::mutex> detail_lock(o.detail_mu);
    o.policy = DetailPolicy(options.detail);
    o.detail_on = true;  // detail from the start: set-up and warm-up steps
    o.detail_since_ns = now_ns();
    o.detail_pace_name = UINT32_MAX;
    detail_window().keep_on.store(false, std::memory_order_relaxed);
    detail_window().held.store(false, std::memory_order_relaxed);
    o.detail_spans.clear();
    detail_window().on.store(true, std::memory_order_relaxed);
  }
  g_enabled.store(true, std::memory_order_seq_cst);
  try {
    o.python_scopes = false;  // until the record_function collector says otherwise
    add_light_callback(o);
    add_detail_callbacks(o);
  } catch (const std::exception& e) {
    g_enabled.store(false, std::memory_order_seq_cst);
    remove_all_callbacks(o);
    return fail(std::string("cannot install the RecordFunction observer: ") +
                e.what());
  }
  o.installed = true;
  return true;
}

void stop_op_observer() {
  Observer& o = observer();
  std::lock_guard<std::mutex> lock(o.mu);
  stop_locked(o);
}

uint64_t begin_user_scope(std::string_view name) {
  ThreadState* st = enter();
  if (st == nullptr) return 0;
  // Tagged with the top bit: never a RecordFunction's handle (a counter)
  // nor its address (user space).
  static std::atomic<uint64_t> next{1};
  const uint64_t key = (uint64_t{1} << 63) | next.fetch_add(1, std::memory_order_relaxed);
  push_frame(st, OpKind::kUserScope, st->names.intern(name), key, -1, at::RecordFunction::currentThreadId());
  leave(st);
  return key;
}

void end_user_scope(uint64_t key) {
  const int64_t end_ns = now_ns();
  if (key == 0) return;
  ThreadState* st = enter();
  if (st == nullptr) return;
  pop_frame(st, key, end_ns);
  leave(st);
}

void skip_user_scope_callbacks(bool on) { t_skip_user_scope = on; }

void python_scopes_covered(bool covered) {
  Observer& o = observer();
  std::lock_guard<std::mutex> lock(o.mu);
  std::lock_guard<std::mutex> detail_lock(o.detail_mu);
  if (!o.installed || o.python_scopes == covered) return;
  // A scope already started keeps the callbacks it started with (torch),
  // so the swap loses no end; one starting during it may go unrecorded.
  remove_all_callbacks(o);
  o.python_scopes = covered;
  try {
    if (!covered) add_light_callback(o);
    if (o.detail_on) add_detail_callbacks(o);
  } catch (const std::exception&) {  // torch refused: as at a window's switch, the run stays light
    remove_detail_callbacks(o);
    if (o.detail_on) detail_switched(o, false, now_ns());  // the window ends here, not at the next boundary
  }
}

void discard_op_observer() {
  Observer& o = observer();
  std::lock_guard<std::mutex> lock(o.mu);
  // In a forked child only the forking thread exists, and it is in none of
  // our callbacks: flags copied from other threads of the parent are stale,
  // so no waiting for them (it would never end).
  g_enabled.store(false, std::memory_order_seq_cst);
  if (o.installed) remove_all_callbacks(o);
  o.light_handle = o.main_handle = o.shape_handle = at::INVALID_CALLBACK_HANDLE;
  o.detail_on = false;
  o.detail_spans.clear();
  o.installed = false;
  for (const auto& st : o.threads) {
    st->busy.store(0);
    st->frozen.store(0);
    reset_thread(*st, 0);
    st->agg_slots.shrink_to_fit();
    st->aggs.shrink_to_fit();
  }
}

}  // namespace torchneck
