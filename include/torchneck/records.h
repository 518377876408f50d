// The one schema of what the collectors record on the hot path.
//
// Records are small, fixed-size, plain data: no pointers into Python or
// libtorch objects, no strings (names are interned ids), no formatting.
// Formatting happens at report time. Sizes are pinned by static_assert so a
// change to a record is a deliberate change to the schema (Tracy's habit).
#pragma once

#include <cstdint>

namespace torchneck {

// Where an operator-level event comes from. Mirrors the RecordFunction scopes
// we subscribe to, without depending on ATen.
enum class OpKind : uint8_t {
  kOperator = 0,       // c10/ATen op (RecordScope::FUNCTION)
  kBackward = 1,       // autograd node run by the engine (BACKWARD_FUNCTION)
  kUserScope = 2,      // record_function(), DataLoader __next__, Optimizer.step
  kTorchScript = 3,    // TorchScript function or method
};
constexpr int kNumOpKinds = 4;

const char* op_kind_name(OpKind kind);

// One completed RecordFunction event, kept in the bounded timeline window.
// seq_nr / forward_tid link a backward node to the forward op that created it
// (docs/architecture.md, "Facts"): needed by layer attribution in analysis.
struct OpEvent {
  int64_t start_ns;      // monotonic clock, see core/clock.h
  int64_t end_ns;
  int64_t seq_nr;        // -1 when the op has no autograd sequence number
  // Backward events: RecordFunction::forwardThreadId(), the thread that ran
  // the forward op. Other events: their own RecordFunction::threadId(), so
  // (forward_tid, seq_nr) of a backward node finds its forward op.
  uint64_t forward_tid;
  uint32_t name_id;      // StringInterner id
  uint32_t thread_index; // index into Run::threads
  OpKind kind;
  uint8_t depth;         // nesting depth on its thread (saturates at 255)
  uint16_t reserved;
  uint32_t reserved2;
};
static_assert(sizeof(OpEvent) == 48, "OpEvent is part of the record schema");

// One c10d collective as this rank took part in it (all_reduce, broadcast,
// all_gather, barrier, ... of gloo, NCCL, MPI, UCC; DDP's bucket
// all-reduces too), put together from the dispatcher op that issues it and
// the process group's Work that completes it (model/collectives.h).
struct CollectiveEvent {
  int64_t start_ns;       // issued: this rank's arrival (the op's start; monotonic clock)
  int64_t end_ns;         // completed (its Work's end); -1 unknown, or not completed at stop
  int64_t bytes;          // its Work's input tensors' bytes, -1 unknown
  uint32_t name_id;       // StringInterner id of the op: "c10d::allreduce_"
  uint32_t thread_index;  // the issuing thread, index into Run::threads
};
static_assert(sizeof(CollectiveEvent) == 32, "CollectiveEvent is part of the record schema");

// An nn.Module call entered or left (from global forward pre/post hooks:
// nn.Module calls produce no RecordFunction event).
struct ModuleEvent {
  int64_t t_ns;
  uint32_t module;        // index into Run::modules
  uint32_t thread_index;  // index into Run::threads
  uint8_t is_exit;        // 0: forward entered, 1: forward returned
  uint8_t reserved[7];
};
static_assert(sizeof(ModuleEvent) == 24, "ModuleEvent is part of the record schema");

}  // namespace torchneck
