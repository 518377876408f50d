// snapshot_op_observer and collect_op_observer (op_observer.h): the
// operator collector's per-thread data (op_observer_state.h) merged into a
// Run, under the observer's lock; not on the hot path.
#include "collect/torch/op_observer_state.h"  // first: ATen under NDEBUG

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "model/op_merge.h"

namespace torchneck {

namespace op_observer_detail {

void reset_thread(ThreadState& st, size_t timeline_capacity) {
  st.stack.clear();
  st.aggs.clear();
  st.side.reset();
  st.agg_slots.assign(kAggSlots, AggSlot{});
  st.timeline = EventBuffer<OpEvent>(timeline_capacity);
  st.abandoned = 0;
  st.fetch_ns = 0;
  st.fetch_cpu_ns = 0;
  st.fetch_runqueue_ns = 0;
  if (st.step_clocks) st.step_clocks->clear();
  st.last_clock = StepClock{};
}

std::vector<std::pair<int64_t, int64_t>> detail_spans_of(Observer& o, int64_t now) {
  std::lock_guard<std::mutex> lock(o.detail_mu);
  std::vector<std::pair<int64_t, int64_t>> spans = o.detail_spans;
  if (o.detail_on && now >= 0) spans.emplace_back(o.detail_since_ns, now);
  return spans;
}

static void add_detail_room_note(Run& run, Observer& o) {
  int64_t step = -1;
  {
    std::lock_guard<std::mutex> lock(o.detail_mu);
    step = o.policy.no_room_step();
  }
  if (step < 0) return;
  run.notes.push_back("detail windows: none opened after step " + std::to_string(step) +
                      ": the windows had filled " + std::to_string(kLightReserveDivisor - 1) + "/" +
                      std::to_string(kLightReserveDivisor) +
                      " of the timeline, and the rest is kept for the light steps (--timeline-events=N keeps "
                      "more windows)");
}

}  // namespace op_observer_detail

using namespace op_observer_detail;  // NOLINT: the collector's own state

namespace {

// Start time, then thread, then outer before inner.
bool timeline_order(const OpEvent& a, const OpEvent& b) {
  if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
  if (a.thread_index != b.thread_index) return a.thread_index < b.thread_index;
  return a.depth < b.depth;
}

// One thread's aggregate for one op, into the merge.
void merge(OpMerger& merger, const StringInterner& interner, const OpAggregate& a, uint32_t thread) {
  if (a.calls == 0 && a.shape_count == 0 && a.other_shapes == 0) return;
  const std::string_view name = interner.lookup(a.name_id);
  merger.add(name, a.kind, thread, a.calls, a.self_ns, a.total_ns);
  for (uint32_t i = 0; i < a.shape_count; ++i) merger.add_shapes(name, a.kind, a.shapes[i].view(), a.shapes[i].count);
  if (a.other_shapes > 0) merger.add_shapes(name, a.kind, kOtherShapes, a.other_shapes);
}

// A thread's DataLoader fetch times into the run's (Run::data_wait_ns).
void add_fetch_times(Run& run, const ThreadState& st) {
  if (st.fetch_ns <= 0) return;
  run.data_wait_ns = std::max<int64_t>(run.data_wait_ns, 0) + st.fetch_ns;
  run.data_wait_cpu_ns = std::max<int64_t>(run.data_wait_cpu_ns, 0) + st.fetch_cpu_ns;
  run.data_wait_runqueue_ns = std::max<int64_t>(run.data_wait_runqueue_ns, 0) + st.fetch_runqueue_ns;
}

// A thread's step clocks into the run's (Run::step_clocks: by thread, then
// time), its last one too where the thinning passed it over.
void add_step_clocks(Run& run, const ThreadState& st) {
  if (!st.step_clocks) return;
  const std::vector<StepClock>& v = st.step_clocks->samples();
  run.step_clocks.insert(run.step_clocks.end(), v.begin(), v.end());
  if (!v.empty() && v.back().step < st.last_clock.step) run.step_clocks.push_back(st.last_clock);
}

std::string_view interned_name(uint32_t id, const void*) { return StringInterner::global().lookup(id); }

// The collectives so far (op_observer_state.h), each arrival with its
// Work's completion (model/collectives.h), replacing any earlier copy.
// Under detail windows (run.detail_spans, set before) an arrival is seen
// in the windows only: the dispatcher op is an operator, the Work a user
// scope seen throughout; the Works that started outside every window go
// with no op seen, and are left out before pairing.
void add_collectives(Run& run, const Collectives& c) {
  std::vector<CollectivePiece> ops, works;
  uint64_t dropped = 0, unpaired = 0;
  copy_collectives(c, ops, works, &dropped);
  if (run.detail_mode == "window") {
    const auto& spans = run.detail_spans;  // by time, disjoint
    auto outside = [&spans](const CollectivePiece& w) {
      auto it = std::upper_bound(spans.begin(), spans.end(), w.start_ns,
                                 [](int64_t t, const std::pair<int64_t, int64_t>& s) { return t < s.second; });
      return it == spans.end() || it->first > w.start_ns;
    };
    works.erase(std::remove_if(works.begin(), works.end(), outside), works.end());
  }
  run.collectives = pair_collectives(std::move(ops), std::move(works), &interned_name, nullptr, &unpaired);
  run.dropped_collectives = dropped;
  const uint64_t untracked = c.untracked.load(std::memory_order_relaxed);
  if (untracked > 0)
    run.notes.push_back("collectives: " + std::to_string(untracked) + " were started while " +
                        std::to_string(kCollectiveSlots) + " others were in flight; their completion is unknown");
  if (unpaired > 0)
    run.notes.push_back("collectives: " + std::to_string(unpaired) + " backend Works had no dispatcher op to go "
                        "with (a backend's own, e.g. TORCH_DISTRIBUTED_DEBUG=DETAIL's checks); not counted");
}

}  // namespace

bool snapshot_op_observer(Run& run, int64_t wait_ns) {
  Observer& o = observer();
  const int64_t deadline = now_ns() + wait_ns;
  std::unique_lock<std::mutex> lock(o.mu, std::defer_lock);
  while (!lock.try_lock()) {  // a thread registering, or stop: brief
    if (now_ns() > deadline) return false;
    std::this_thread::yield();
  }
  if (!o.installed) return false;

  const StringInterner& interner = StringInterner::global();
  OpMerger merger;
  std::vector<OpAggregate> copies;
  std::vector<const OpEvent*> chunks;
  size_t missed = 0;
  uint64_t dropped = 0;
  const size_t first_event = run.timeline.size();
  for (const auto& st : o.threads) {
    copies.clear();
    st->frozen.store(1, std::memory_order_seq_cst);
    bool quiet = true;
    while (st->busy.load(std::memory_order_seq_cst) != 0) {  // inside one callback: microseconds
      if (now_ns() > deadline) {
        quiet = false;
        break;
      }
      std::this_thread::yield();
    }
    size_t count = 0;
    if (quiet) {
      copies.assign(st->aggs.begin(), st->aggs.end());
      count = st->timeline.snapshot_chunks(chunks);
      dropped += st->timeline.dropped();
      add_fetch_times(run, *st);
      add_step_clocks(run, *st);
    }
    st->frozen.store(0, std::memory_order_release);
    if (!quiet) {
      ++missed;
      continue;
    }
    for (const OpAggregate& a : copies) merge(merger, interner, a, st->thread_index);
    EventBuffer<OpEvent>::snapshot_copy(chunks, count, run.timeline);
  }
  merger.finish(run.ops, o.options.max_shapes_per_op);
  std::sort(run.timeline.begin() + static_cast<std::ptrdiff_t>(first_event), run.timeline.end(),
            timeline_order);
  run.dropped_events += dropped;
  run.detail_mode = o.options.detail_windows ? "window" : "full";
  run.detail_spans = detail_spans_of(o, now_ns());
  add_detail_room_note(run, o);
  add_collectives(run, o.collectives);
  if (missed > 0)
    run.notes.push_back("operator observer: " + std::to_string(missed) +
                        " threads were inside a callback when this snapshot was taken and are left out of it");
  return true;
}

void collect_op_observer(Run& run) {
  Observer& o = observer();
  std::lock_guard<std::mutex> lock(o.mu);
  stop_locked(o);  // collecting a running observer would race its callbacks

  const StringInterner& interner = StringInterner::global();
  OpMerger merger;
  size_t events = 0;
  uint64_t dropped = 0;
  uint64_t unfinished = 0;
  for (const auto& st : o.threads) {
    for (const OpAggregate& agg : st->aggs) merge(merger, interner, agg, st->thread_index);
    events += st->timeline.size();
    dropped += st->timeline.dropped();
    unfinished += st->abandoned + st->stack.size();
    add_fetch_times(run, *st);
    add_step_clocks(run, *st);
  }
  merger.finish(run.ops, o.options.max_shapes_per_op);

  run.timeline.reserve(run.timeline.size() + events);
  for (const auto& st : o.threads) {
    st->timeline.for_each([&](const OpEvent& ev) { run.timeline.push_back(ev); });
  }
  std::sort(run.timeline.begin(), run.timeline.end(), timeline_order);
  run.dropped_events += dropped;
  run.detail_mode = o.options.detail_windows ? "window" : "full";
  run.detail_spans = detail_spans_of(o, -1);  // stop closed the last one
  add_detail_room_note(run, o);
  add_collectives(run, o.collectives);
  if (unfinished > 0) {
    run.notes.push_back(
        "operator observer: " + std::to_string(unfinished) +
        " events started but did not end on their thread before stop "
        "(still open, or ended asynchronously); they are not counted");
  }

  // Start the next session clean; states stay registered (threads keep
  // their pointers), with their memory released.
  for (const auto& st : o.threads) {
    reset_thread(*st, o.options.timeline_events_per_thread);
    st->agg_slots.shrink_to_fit();
    st->aggs.shrink_to_fit();
  }
}

}  // namespace torchneck
