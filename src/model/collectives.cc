#include "model/collectives.h"

#include <algorithm>
#include <map>
#include <utility>

namespace torchneck {

namespace {

// What a kind of collective is run as where the backend has no Work of its
// own for it (measured with torch 2.6): gloo has no reduce-scatter, and
// runs c10d's _reduce_scatter_base_ (FSDP's reduce_scatter_tensor) as an
// all-reduce of the whole input, its Work named gloo:all_reduce (and
// reduce_scatter_tensor_coalesced_ as one all-reduce per tensor); NCCL runs
// a barrier as an all-reduce of one element (its Work nccl:all_reduce).
std::string_view run_as(std::string_view kind) {
  if (kind == "reduce_scatter" || kind == "barrier") return "all_reduce";
  return "";
}

}  // namespace

std::string_view collective_kind_of_op(std::string_view op) {
  if (op.rfind("c10d::", 0) != 0) return "";
  op.remove_prefix(6);
  // The dispatcher ops of torch/csrc/distributed/c10d/Ops.cpp, by what they
  // do: torch.distributed's all_gather is allgather_,
  // all_gather_into_tensor _allgather_base_ (FSDP's), reduce_scatter_tensor
  // _reduce_scatter_base_, their coalesced forms the *_coalesced_ ops.
  static const std::pair<std::string_view, std::string_view> kOps[] = {
      {"allreduce_", "all_reduce"},
      {"allreduce_coalesced_", "all_reduce"},
      {"broadcast_", "broadcast"},
      {"allgather_", "all_gather"},
      {"_allgather_base_", "all_gather"},
      {"allgather_coalesced_", "all_gather"},
      {"allgather_into_tensor_coalesced_", "all_gather"},
      {"reduce_", "reduce"},
      {"gather_", "gather"},
      {"scatter_", "scatter"},
      {"reduce_scatter_", "reduce_scatter"},
      {"_reduce_scatter_base_", "reduce_scatter"},
      {"reduce_scatter_tensor_coalesced_", "reduce_scatter"},
      {"alltoall_", "all_to_all"},
      {"alltoall_base_", "all_to_all"},
      {"barrier", "barrier"},
      {"send", "send"},
      {"recv_", "recv"},
      {"recv_any_source_", "recv"},
  };
  for (const auto& [name, kind] : kOps)
    if (op == name) return kind;
  return "";
}

std::string_view collective_kind_of_work(std::string_view work) {
  const size_t colon = work.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 >= work.size()) return "";
  if (work.find(':', colon + 1) != std::string_view::npos) return "";  // "c10d::x", "aten::x"
  const std::string_view backend = work.substr(0, colon);
  bool known = false;
  for (std::string_view b : {"gloo", "nccl", "mpi", "ucc", "xccl"}) known = known || backend == b;
  if (!known) return "";
  const std::string_view title = work.substr(colon + 1);
  // The backends' profiling titles that are not the kind's own name
  // (ProcessGroupGloo.cpp, ProcessGroupNCCL.cpp); gloo's all_gather,
  // all_reduce, all_to_all, broadcast, ... are.
  static const std::pair<std::string_view, std::string_view> kTitles[] = {
      {"_all_gather_base", "all_gather"},
      {"all_gather_into_tensor_coalesced", "all_gather"},
      {"allgather_coalesced", "all_gather"},
      {"_reduce_scatter_base", "reduce_scatter"},
      {"reduce_scatter_tensor_coalesced", "reduce_scatter"},
      {"all_reduce_coalesced", "all_reduce"},
      {"allreduce_coalesced", "all_reduce"},
      {"sparse_all_reduce", "all_reduce"},
      {"_broadcast_oop", "broadcast"},
      {"_reduce_oop", "reduce"},
      {"alltoall", "all_to_all"},
      {"alltoall_base", "all_to_all"},
      {"recvAnySource", "recv"},
  };
  for (const auto& [name, kind] : kTitles)
    if (title == name) return kind;
  return title;
}

std::string_view collective_kind(std::string_view name) {
  const std::string_view op = collective_kind_of_op(name);
  return !op.empty() ? op : collective_kind_of_work(name);
}

std::vector<CollectiveEvent> pair_collectives(std::vector<CollectivePiece> ops, std::vector<CollectivePiece> works,
                                              std::string_view (*name)(uint32_t id, const void* ctx),
                                              const void* ctx, uint64_t* unpaired) {
  auto by_start = [](const CollectivePiece& a, const CollectivePiece& b) { return a.start_ns < b.start_ns; };
  std::stable_sort(ops.begin(), ops.end(), by_start);
  std::stable_sort(works.begin(), works.end(), by_start);
  // Works of each kind, in the order the backend took them.
  std::map<std::string, std::vector<const CollectivePiece*>> queue;
  for (const CollectivePiece& w : works) queue[std::string(collective_kind_of_work(name(w.name_id, ctx)))].push_back(&w);
  std::map<std::string, size_t> next;
  uint64_t skipped = 0;
  std::vector<CollectiveEvent> out;
  out.reserve(ops.size());
  for (const CollectivePiece& op : ops) {
    std::string kind(collective_kind_of_op(name(op.name_id, ctx)));
    if (queue.count(kind) == 0 && !run_as(kind).empty()) kind = run_as(kind);
    CollectiveEvent e{op.start_ns, -1, -1, op.name_id, op.thread_index};
    auto q = queue.find(kind);
    size_t& i = next[kind];
    // A Work is made inside its op: one that started before this op did is
    // another's (gloo's extra all-reduces of a coalesced reduce-scatter),
    // left unpaired.
    while (q != queue.end() && i < q->second.size() && q->second[i]->start_ns < op.start_ns) ++i, ++skipped;
    if (q != queue.end() && i < q->second.size()) {
      const CollectivePiece* w = q->second[i++];
      e.end_ns = w->end_ns > 0 ? std::max(w->end_ns, op.start_ns) : -1;
      e.bytes = w->bytes;
    }
    out.push_back(e);
  }
  uint64_t left = skipped;
  for (const auto& [kind, v] : queue) left += v.size() - std::min(v.size(), next[kind]);
  if (unpaired != nullptr) *unpaired = left;
  return out;
}

}  // namespace torchneck
