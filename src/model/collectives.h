// A collective as a rank sees it, put together from the two events torch
// gives (measured on torch 1.13 and 2.6 with gloo, docs/distributed.md):
//   - the dispatcher op "c10d::allreduce_" (FUNCTION scope) on the thread
//     that issues it: its start is the rank's arrival; it returns at once;
//   - the process group's asynchronous Work event "gloo:all_reduce", which
//     starts when the backend's worker takes the work off its queue (not at
//     arrival) and ends when the collective completes, on that worker.
// On one rank, the k-th op of a kind goes with the k-th Work of that kind
// (one FIFO queue per process group).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "torchneck/records.h"

namespace torchneck {

// A recorded piece: an op (arrival) or a Work (completion), with its name.
struct CollectivePiece {
  int64_t start_ns = 0;
  int64_t end_ns = 0;  // 0: not ended
  int64_t bytes = -1;
  uint32_t name_id = 0;
  uint32_t thread_index = 0;
};

// What a collective does, one word per kind whichever op or backend ran
// it: "all_gather" for "c10d::allgather_", "c10d::_allgather_base_"
// (all_gather_into_tensor: FSDP's), "c10d::allgather_into_tensor_coalesced_";
// "reduce_scatter" for "c10d::_reduce_scatter_base_" (reduce_scatter_tensor)
// and "c10d::reduce_scatter_tensor_coalesced_", even where gloo runs it as
// an all-reduce; "" for a name that is not a collective's dispatcher op.
std::string_view collective_kind_of_op(std::string_view op);
// The same for a backend's Work ("backend:title"): "all_gather" for
// "gloo:all_gather", "nccl:_all_gather_base"; a title of no known kind is
// its own kind; "" when the name is not a backend's Work.
std::string_view collective_kind_of_work(std::string_view work);
// Either: the kind of an op, else of a Work, else "".
std::string_view collective_kind(std::string_view name);

// The collectives of one rank: every op, in the order they started, with
// the completion (and bytes) of its Work where one of its kind is left to
// pair with (the next that did not start before the op; for a kind the
// rank's backend has no Work of, what it runs it as: gloo's reduce-scatter
// is an all-reduce); NAME(id) gives a piece's name. *UNPAIRED: Works without an op
// (a backend's own, e.g. TORCH_DISTRIBUTED_DEBUG=DETAIL's checks).
std::vector<CollectiveEvent> pair_collectives(std::vector<CollectivePiece> ops, std::vector<CollectivePiece> works,
                                              std::string_view (*name)(uint32_t id, const void* ctx),
                                              const void* ctx, uint64_t* unpaired);

}  // namespace torchneck
