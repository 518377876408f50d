#include "model/collectives.h"

#include <algorithm>
#include <map>
#include <utility>

namespace torchneck {

std::string_view collective_kind_of_op(std::string_view op) {
  if (op.rfind("c10d::", 0) != 0) return "";
  op.remove_prefix(6);
  // The dispatcher ops of torch/csrc/distributed/c10d/Ops.cpp, by the kind
  // of Work the backends name them (ProcessGroupGloo.cpp's profiling titles).
  static const std::pair<std::string_view, std::string_view> kOps[] = {
      {"allreduce_", "all_reduce"},
      {"allreduce_coalesced_", "allreduce_coalesced"},
      {"broadcast_", "broadcast"},
      {"allgather_", "all_gather"},
      {"_allgather_base_", "_allgather_base"},
      {"allgather_coalesced_", "all_gather_coalesced"},
      {"allgather_into_tensor_coalesced_", "allgather_into_tensor_coalesced"},
      {"reduce_", "reduce"},
      {"gather_", "gather"},
      {"scatter_", "scatter"},
      {"reduce_scatter_", "reduce_scatter"},
      // gloo has no reduce-scatter of one tensor: torch 2.x runs it as an
      // all-reduce of the whole input, and names its Work so.
      {"_reduce_scatter_base_", "all_reduce"},
      {"alltoall_", "alltoall"},
      {"alltoall_base_", "alltoall_base"},
      {"barrier", "barrier"},
      {"send", "send"},
      {"recv_", "recv"},
      {"recv_any_source_", "recvAnySource"},
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
  for (std::string_view b : {"gloo", "nccl", "mpi", "ucc", "xccl"})
    if (backend == b) return work.substr(colon + 1);
  return "";
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
  std::vector<CollectiveEvent> out;
  out.reserve(ops.size());
  for (const CollectivePiece& op : ops) {
    const std::string kind(collective_kind_of_op(name(op.name_id, ctx)));
    CollectiveEvent e{op.start_ns, -1, -1, op.name_id, op.thread_index};
    auto q = queue.find(kind);
    size_t& i = next[kind];
    if (q != queue.end() && i < q->second.size()) {
      const CollectivePiece* w = q->second[i++];
      e.end_ns = w->end_ns > 0 ? std::max(w->end_ns, op.start_ns) : -1;
      e.bytes = w->bytes;
    }
    out.push_back(e);
  }
  uint64_t left = 0;
  for (const auto& [kind, v] : queue) left += v.size() - std::min(v.size(), next[kind]);
  if (unpaired != nullptr) *unpaired = left;
  return out;
}

}  // namespace torchneck
