// The collectives' part of the operator collector (op_observer_state.h,
// Collectives): a collective's dispatcher op and its backend's Work, each
// in a cell claimed with atomics, the Work found again at its end (on
// another thread) through a slot keyed by its RecordFunction. Called from
// the callbacks in op_observer.cc for those events only; no lock.
#include "collect/torch/op_observer_state.h"  // first: ATen under NDEBUG

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/clock.h"

namespace torchneck::op_observer_detail {

namespace {

// The bytes of a collective's input tensors (lists summed), -1 when the
// Work was made without them. Read in the start callback only: the inputs
// point into a vector the Work's constructor frees.
int64_t input_bytes(const at::RecordFunction& fn) {
  int64_t bytes = 0;
  bool any = false;
  auto add = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    bytes += t.numel() * static_cast<int64_t>(t.element_size());
    any = true;
  };
  for (const c10::IValue& v : fn.inputs()) {
    if (v.isTensor()) {
      add(v.toTensor());
    } else if (v.isTensorList()) {
      for (const c10::IValue& t : v.toListRef()) add(t.toTensor());
    }
  }
  return any ? bytes : -1;
}

inline size_t collective_slot_start(uint64_t key) {
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 40) & (kCollectiveSlots - 1);
}

// A cell for a piece, or nullptr when the session's cells are used up (the
// piece is counted as dropped: next - kMaxCollectives).
inline CollectiveCell* claim_cell(Collectives& c, uint64_t* index) {
  if (c.cells == nullptr) return nullptr;
  const uint64_t i = c.next.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMaxCollectives) return nullptr;
  *index = i;
  return &c.cells[i];
}

// A collective's dispatcher op ended on this thread: the rank's arrival,
// from the op's start.
}  // namespace

void record_arrival(ThreadState* st, const Frame& f, int64_t end_ns) {
  uint64_t i = 0;
  CollectiveCell* cell = claim_cell(observer().collectives, &i);
  if (cell == nullptr) return;
  cell->bytes = -1;
  cell->name_id = f.name_id;
  cell->thread_index = st->thread_index;
  cell->is_op = 1;
  cell->end_ns.store(end_ns, std::memory_order_relaxed);
  cell->start_ns.store(f.start_ns, std::memory_order_release);  // last: the cell is whole
}

// A backend's Work started (on its worker, or where it was made): a cell,
// and a slot that its end, on whichever thread completes it, finds it by.
// A few atomics, no lock; the search over slots is short while few are in
// flight.
void start_collective(ThreadState* st, const at::RecordFunction& fn) {
  const uint32_t name_id = st->names.intern(fn.name());
  if (collective_class(st, name_id) != kCollectiveWork) return;
  Collectives& c = observer().collectives;
  uint64_t i = 0;
  CollectiveCell* cell = claim_cell(c, &i);
  if (cell == nullptr) return;
  cell->bytes = input_bytes(fn);
  cell->name_id = name_id;
  cell->thread_index = st->thread_index;
  cell->is_op = 0;
  const uint64_t key = frame_key(fn);
  const size_t first = collective_slot_start(key);
  bool tracked = false;
  for (size_t n = 0; n < kCollectiveSlots && !tracked; ++n) {
    CollectiveSlot& slot = c.slots[(first + n) & (kCollectiveSlots - 1)];
    uint64_t expected = 0;
    if (slot.key.load(std::memory_order_relaxed) == 0 &&
        slot.key.compare_exchange_strong(expected, key, std::memory_order_acq_rel)) {
      slot.cell.store(static_cast<uint32_t>(i), std::memory_order_release);
      tracked = true;
    }
  }
  if (!tracked) c.untracked.fetch_add(1, std::memory_order_relaxed);
  cell->start_ns.store(now_ns(), std::memory_order_release);  // last: the cell is whole
}

// Its end, on whichever thread completes the Work.
void end_collective(const at::RecordFunction& fn, int64_t end_ns) {
  Collectives& c = observer().collectives;
  if (c.slots == nullptr) return;
  const uint64_t key = frame_key(fn);
  const size_t first = collective_slot_start(key);
  for (size_t n = 0; n < kCollectiveSlots; ++n) {
    CollectiveSlot& slot = c.slots[(first + n) & (kCollectiveSlots - 1)];
    if (slot.key.load(std::memory_order_acquire) != key) continue;
    const uint32_t i = slot.cell.load(std::memory_order_acquire);
    c.cells[i].end_ns.store(end_ns, std::memory_order_release);
    slot.key.store(0, std::memory_order_release);
    return;
  }
}

void copy_collectives(const Collectives& c, std::vector<CollectivePiece>& ops, std::vector<CollectivePiece>& works,
                      uint64_t* dropped) {
  const uint64_t claimed = c.next.load(std::memory_order_acquire);
  const size_t n = static_cast<size_t>(std::min<uint64_t>(claimed, kMaxCollectives));
  *dropped = claimed - n;
  if (c.cells == nullptr) return;
  for (size_t i = 0; i < n; ++i) {
    const CollectiveCell& cell = c.cells[i];
    const int64_t start = cell.start_ns.load(std::memory_order_acquire);
    if (start == 0) continue;  // being filled
    CollectivePiece p;
    p.start_ns = start;
    p.end_ns = cell.end_ns.load(std::memory_order_acquire);
    p.bytes = cell.bytes;
    p.name_id = cell.name_id;
    p.thread_index = cell.thread_index;
    (cell.is_op ? ops : works).push_back(p);
  }
}

void reset_collectives(Collectives& c) {
  if (c.cells == nullptr) {
    // Zeroed pages: memory is touched only as collectives arrive.
    c.cells = static_cast<CollectiveCell*>(std::calloc(kMaxCollectives, sizeof(CollectiveCell)));
    c.slots = static_cast<CollectiveSlot*>(std::calloc(kCollectiveSlots, sizeof(CollectiveSlot)));
    if (c.cells == nullptr || c.slots == nullptr) {  // no collectives recorded, nothing else lost
      std::free(c.cells);
      std::free(c.slots);
      c.cells = nullptr;
      c.slots = nullptr;
    }
  } else {
    const size_t used = static_cast<size_t>(std::min<uint64_t>(c.next.load(), kMaxCollectives));
    std::memset(static_cast<void*>(c.cells), 0, used * sizeof(CollectiveCell));
    std::memset(static_cast<void*>(c.slots), 0, kCollectiveSlots * sizeof(CollectiveSlot));
  }
  c.next.store(0);
  c.untracked.store(0);
}

}  // namespace torchneck::op_observer_detail
