// A Kineto trace's collectives as Run::collectives, the events a live run
// records (model/collectives.h), so that the cross-rank analysis of a folder
// of rank traces is the live one (analyze/cross_rank.h).
//
// What the trace holds of one collective (torch 2.x, NCCL; the a100 and
// sampled fixtures): the dispatcher op "c10d::allreduce_" on the issuing
// thread, inside it "record_param_comms" and the runtime calls, among them
// the launch of the NCCL kernel (correlation id), and on the device that
// kernel, which runs from the moment its stream reaches it until every rank's
// kernel has joined and the data has moved. On a GPU the kernel is the
// collective: its start is the rank's arrival (the CPU only queued it), its
// end the completion. Without device work (gloo on CPU tensors) the Work's
// annotation "gloo:all_reduce" ends at completion, as in a live run, and
// pairs with the op as there (pair_collectives); a trace with Works and no
// ops (the cpu_only_gloo fixture) gives the Works alone, whose start is the
// backend's dequeue, not the arrival.
#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ingest/kineto_to_run.h"
#include "model/collectives.h"

namespace torchneck {
namespace {

bool is_nccl_kernel(std::string_view n) {
  return n.find("nccl") != std::string_view::npos || n.find("Nccl") != std::string_view::npos ||
         n.find("rccl") != std::string_view::npos;
}

std::string_view name_of(uint32_t id, const void* ctx) {
  const auto& names = *static_cast<const std::vector<std::string>*>(ctx);
  return id < names.size() ? std::string_view(names[id]) : std::string_view();
}

struct Op {
  int64_t start, end;
  uint32_t name, thread;
  int64_t dev_start = INT64_MAX, dev_end = INT64_MIN;  // its NCCL kernels
};

}  // namespace

void add_collectives(Run& run) {
  const Activities& trace = run.activities;
  std::unordered_map<int64_t, uint32_t> thread_of;  // os tid -> index (one process per trace)
  for (uint32_t i = 0; i < run.threads.size(); ++i) thread_of.emplace(static_cast<int64_t>(run.threads[i].os_tid), i);

  std::vector<Op> ops;
  std::vector<CollectivePiece> works;
  std::unordered_map<int64_t, std::vector<size_t>> ops_of_thread;  // tid -> ops, by start
  for (const Activity& e : trace.events) {
    if (e.cat != ActivityKind::kCpuOp && e.cat != ActivityKind::kUserAnnotation) continue;
    const std::string& name = trace.name_of(e);
    auto t = thread_of.find(e.tid);
    const uint32_t thread = t != thread_of.end() ? t->second : run.main_thread;
    if (e.cat == ActivityKind::kCpuOp && !collective_kind_of_op(name).empty()) {
      ops_of_thread[e.tid].push_back(ops.size());
      ops.push_back(Op{e.ts_ns, e.end_ns(), e.name, thread});
    } else if (!collective_kind_of_work(name).empty()) {
      works.push_back(CollectivePiece{e.ts_ns, e.end_ns(), -1, e.name, thread});
    }
  }

  // The device work each op launched: its runtime calls (inside the op, on
  // its thread) by correlation id.
  std::unordered_map<int64_t, size_t> op_of_correlation;
  for (const Activity& e : trace.events) {
    if (e.cat != ActivityKind::kRuntime || e.correlation < 0) continue;
    auto it = ops_of_thread.find(e.tid);
    if (it == ops_of_thread.end()) continue;
    const std::vector<size_t>& v = it->second;  // by start: events come sorted
    auto after = std::upper_bound(v.begin(), v.end(), e.ts_ns, [&](int64_t t, size_t k) { return t < ops[k].start; });
    if (after == v.begin()) continue;
    const size_t k = *(after - 1);
    if (e.ts_ns < ops[k].end) op_of_correlation.emplace(e.correlation, k);
  }
  bool on_device = false;
  for (const Activity& e : trace.events) {
    if (e.cat != ActivityKind::kKernel || e.correlation < 0 || !is_nccl_kernel(trace.name_of(e))) continue;
    auto it = op_of_correlation.find(e.correlation);
    if (it == op_of_correlation.end()) continue;
    Op& op = ops[it->second];
    op.dev_start = std::min(op.dev_start, e.ts_ns);
    op.dev_end = std::max(op.dev_end, e.end_ns());
    on_device = true;
  }

  run.collectives.clear();
  if (on_device) {
    // The kernels are the collectives; an op that launched none (a barrier
    // done on the host, a send of a CPU tensor) keeps its host times.
    run.collectives_on_device = true;
    for (const Op& op : ops) {
      const bool dev = op.dev_end > op.dev_start;
      run.collectives.push_back(
          CollectiveEvent{dev ? op.dev_start : op.start, dev ? op.dev_end : -1, -1, op.name, op.thread});
    }
  } else if (!ops.empty()) {
    std::vector<CollectivePiece> pieces;
    for (const Op& op : ops) pieces.push_back(CollectivePiece{op.start, op.end, -1, op.name, op.thread});
    uint64_t unpaired = 0;
    run.collectives = pair_collectives(std::move(pieces), std::move(works), name_of, &run.strings, &unpaired);
  } else {
    for (const CollectivePiece& w : works)
      run.collectives.push_back(CollectiveEvent{w.start_ns, w.end_ns, -1, w.name_id, w.thread_index});
    if (!works.empty())
      run.notes.push_back("collectives: the trace has the backend's Works (" + trace.names[works[0].name_id] +
                          ") but not the c10d ops that issued them: a rank's arrival is taken as its Work's start "
                          "(the backend's dequeue), which may be later");
  }
  std::stable_sort(run.collectives.begin(), run.collectives.end(),
                   [](const CollectiveEvent& a, const CollectiveEvent& b) { return a.start_ns < b.start_ns; });
}

}  // namespace torchneck
