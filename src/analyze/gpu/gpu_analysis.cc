#include "analyze/gpu/gpu_analysis.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>

namespace torchneck::gpu {
namespace {

using Cat = ActivityKind;
using Event = Activity;

bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }
bool starts_with(std::string_view s, std::string_view p) { return s.rfind(p, 0) == 0; }

bool launch_call(std::string_view n) {
  return contains(n, "LaunchKernel") || contains(n, "LaunchCooperativeKernel") || n == "cuLaunchKernel" ||
         contains(n, "hipModuleLaunchKernel") || contains(n, "hipExtModuleLaunchKernel") ||
         contains(n, "Memcpy") || contains(n, "Memset");
}

}  // namespace

bool is_tensor_core_kernel(const std::string& name) {
  // torch_tb_profiler/profiler/tensor_core.py (TC_Allowlist), plus the
  // names of newer cuBLAS/CUTLASS tensor-core kernels.
  static const char* const kPatterns[] = {
      "h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816", "dgrad_1x1_stride_2x2", "first_layer_wgrad_kernel",
      "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm", "xmma_sparse_conv",
      "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm", "c1688", "wgmma", "tensorop",
      "_tf32_", "bf16_s1688", "cutlass_80_tensorop", "sm80_xmma", "sm90_xmma"};
  for (const char* p : kPatterns)
    if (name.find(p) != std::string::npos) return true;
  return false;
}

bool synchronising_call(std::string_view n) {
  return n == "cudaDeviceSynchronize" || n == "cudaStreamSynchronize" || n == "cudaEventSynchronize" ||
         n == "cudaMemcpy" || n == "cudaStreamWaitEvent" || n == "hipDeviceSynchronize" ||
         n == "hipStreamSynchronize" || n == "hipEventSynchronize" || n == "hipMemcpy";
}

GpuFacts gpu_facts(const Run& run, size_t top) {
  const Activities& t = run.activities;
  GpuFacts g;
  if (!t.devices.empty()) {
    g.device_name = t.devices.front().name;
    g.device_memory = t.devices.front().total_global_mem;
    g.compute_major = t.devices.front().compute_major;
  }
  if (!t.device_memory.empty()) {
    const DeviceMemoryUse& m = t.device_memory.begin()->second;
    g.peak_allocated = m.peak_allocated;
    g.peak_reserved = m.has_totals ? m.peak_reserved : -1;
    g.peak_is_lower_bound = !m.has_totals;
  }
  int64_t first = INT64_MAX, last = INT64_MIN;
  // Per CPU thread: the open cpu_ops, to name the operator behind a runtime call.
  std::map<std::pair<int64_t, int64_t>, std::vector<const Event*>> open;
  std::unordered_map<int64_t, const Event*> runtime_by_corr;
  // Runtime call (by event index) -> its outermost and innermost operator,
  // as name ids: the "outer > inner" text is only built where it is shown.
  constexpr uint32_t kNoOp = UINT32_MAX;
  struct CallContext {
    uint32_t outer = kNoOp, inner = kNoOp;
  };
  std::vector<CallContext> context_of(t.events.size());
  auto context_text = [&](CallContext c) -> std::string {
    if (c.outer == kNoOp) return "(no operator)";
    if (c.outer == c.inner) return t.names[c.outer];
    return t.names[c.outer] + " > " + t.names[c.inner];
  };
  std::map<std::string, SyncPoint> syncs;
  std::unordered_map<uint32_t, KernelStats> kernels;
  std::unordered_map<uint32_t, int64_t> longest;
  // Layers: open module scopes per thread, flows resolved in time order.
  std::map<std::pair<int64_t, int64_t>, std::vector<const Event*>> modules;
  std::vector<const ActivityFlow*> flows;
  for (const auto& f : t.flows)
    if (f.cat == FlowKind::kFwdBwd) flows.push_back(&f);
  std::stable_sort(flows.begin(), flows.end(),
                   [](const ActivityFlow* a, const ActivityFlow* b) { return a->ts_ns < b->ts_ns; });
  size_t next_flow = 0;
  std::unordered_map<int64_t, std::string> module_of_flow;         // flow id -> forward op's module
  std::unordered_map<const Event*, std::string> module_of_backward;  // backward op -> module
  struct Attribution {
    std::string module;
    bool backward = false;
  };
  std::unordered_map<const Event*, Attribution> layer_of_call;
  auto innermost_module = [&](int64_t pid, int64_t tid, int64_t ts) -> std::string {
    auto it = modules.find({pid, tid});
    if (it == modules.end()) return {};
    auto& stack = it->second;
    while (!stack.empty() && stack.back()->end_ns() <= ts) stack.pop_back();
    return stack.empty() ? std::string() : t.name_of(*stack.back()).substr(11);  // "nn.Module: "
  };
  auto resolve_flow = [&](const ActivityFlow& f) {
    if (f.start) {
      const std::string m = innermost_module(f.pid, f.tid, f.ts_ns);
      if (!m.empty()) module_of_flow[f.id] = m;
      return;
    }
    auto m = module_of_flow.find(f.id);
    if (m == module_of_flow.end()) return;
    auto it = open.find({f.pid, f.tid});
    if (it == open.end()) return;
    for (auto op = it->second.rbegin(); op != it->second.rend(); ++op)
      if ((*op)->end_ns() > f.ts_ns && starts_with(t.name_of(**op), "autograd::engine::evaluate_function")) {
        module_of_backward[*op] = m->second;
        break;
      }
  };
  for (const Event& e : t.events) {
    if (e.cat == Cat::kTrace) continue;
    while (next_flow < flows.size() && flows[next_flow]->ts_ns < e.ts_ns) resolve_flow(*flows[next_flow++]);
    first = std::min(first, e.ts_ns);
    last = std::max(last, e.end_ns());
    const std::string& name = t.name_of(e);
    if (e.cat == Cat::kPythonFunction && starts_with(name, "nn.Module: ")) {
      auto& stack = modules[{e.pid, e.tid}];
      while (!stack.empty() && stack.back()->end_ns() <= e.ts_ns) stack.pop_back();
      stack.push_back(&e);
      continue;
    }
    if (e.cat == Cat::kCpuOp || e.cat == Cat::kUserAnnotation) {
      auto& stack = open[{e.pid, e.tid}];
      while (!stack.empty() && stack.back()->end_ns() <= e.ts_ns) stack.pop_back();
      stack.push_back(&e);
      continue;
    }
    // cuda_sync events sit on the device's track and repeat what the
    // synchronising runtime call (matched by correlation) already says.
    if (e.cat == Cat::kRuntime || e.cat == Cat::kDriver) {
      auto& stack = open[{e.pid, e.tid}];
      while (!stack.empty() && stack.back()->end_ns() <= e.ts_ns) stack.pop_back();
      // (An empty name counts as none, as it did when these were strings.)
      CallContext c;
      for (const Event* o : stack) {
        const std::string& n = t.name_of(*o);
        if (starts_with(n, "ProfilerStep#")) continue;
        if (c.outer == kNoOp || t.names[c.outer].empty()) c.outer = o->name;
        c.inner = o->name;
      }
      if (c.outer != kNoOp && t.names[c.outer].empty()) c.outer = kNoOp;
      {  // which layer, forward or backward, this call's device work belongs to
        Attribution a;
        for (const Event* o : stack) {
          auto b = module_of_backward.find(o);
          if (b != module_of_backward.end()) {
            a.module = b->second;
            a.backward = true;
          }
        }
        if (a.module.empty()) a.module = innermost_module(e.pid, e.tid, e.ts_ns);
        if (!a.module.empty()) layer_of_call[&e] = std::move(a);
      }
      if (e.correlation >= 0) runtime_by_corr[e.correlation] = &e;
      if (launch_call(name)) {
        ++g.launches;
        g.launch_api_ns += e.dur_ns;
      }
      if (synchronising_call(name)) {
        const std::string& what = name;
        const std::string context = context_text(c);
        SyncPoint& s = syncs[what + "\n" + context];
        s.what = what;
        s.context = context;
        ++s.calls;
        s.total_ns += e.dur_ns;
      }
      context_of[static_cast<size_t>(&e - t.events.data())] = c;
      continue;
    }
    if (!is_gpu_work(e.cat)) continue;
    if (e.cat == Cat::kKernel) {
      ++g.kernels;
      g.kernel_ns += e.dur_ns;
      if (e.dur_ns < kShortKernelNs) ++g.short_kernels;
      KernelStats& k = kernels[e.name];
      ++k.calls;
      k.total_ns += e.dur_ns;
      if (e.dur_ns >= longest[e.name]) {
        longest[e.name] = e.dur_ns;
        std::copy(e.grid, e.grid + 3, k.grid.begin());
        std::copy(e.block, e.block + 3, k.block.begin());
      }
    } else if (e.cat == Cat::kMemcpy) {
      g.memcpy_ns += e.dur_ns;
      if (contains(name, "Pageable")) {
        ++g.pageable_copies;
        g.pageable_ns += e.dur_ns;
        g.pageable_bytes += std::max<int64_t>(0, e.bytes);
      }
    } else {
      g.memset_ns += e.dur_ns;
    }
  }
  g.span_ns = last > first ? last - first : 0;

  // Device work back to the call that launched it: launch delays, GPU time
  // per operator, device-to-host copies as sync points.
  std::vector<int64_t> delays;
  std::unordered_map<uint32_t, OpGpuTime> by_op_id;  // by the outer operator's name id
  std::map<std::string, LayerGpuTime> by_layer;
  for (const Event& e : t.events) {
    if (!is_gpu_work(e.cat) || e.correlation < 0) continue;
    auto it = runtime_by_corr.find(e.correlation);
    if (it == runtime_by_corr.end()) continue;
    const Event& call = *it->second;
    if (e.cat == Cat::kKernel) delays.push_back(std::max<int64_t>(0, e.ts_ns - call.ts_ns));
    auto layer = layer_of_call.find(&call);
    if (layer != layer_of_call.end()) {
      LayerGpuTime& l = by_layer[layer->second.module];
      l.module = layer->second.module;
      (layer->second.backward ? l.backward_ns : l.forward_ns) += e.dur_ns;
      l.kernels += e.cat == Cat::kKernel;
    }
    const CallContext& c = context_of[static_cast<size_t>(&call - t.events.data())];
    OpGpuTime& o = by_op_id[c.outer];
    o.gpu_ns += e.dur_ns;
    o.kernels += e.cat == Cat::kKernel;
    const std::string& name = t.name_of(e);
    if (e.cat == Cat::kMemcpy && contains(name, "DtoH")) {
      const std::string context = context_text(c);
      SyncPoint& s = syncs[name + "\n" + context];
      s.what = name;
      s.context = context;
      ++s.calls;
      s.total_ns += e.dur_ns;
    }
  }
  if (!delays.empty()) {
    std::sort(delays.begin(), delays.end());
    g.median_launch_delay_ns = delays[delays.size() / 2];
    g.p99_launch_delay_ns = delays[std::min(delays.size() - 1, delays.size() * 99 / 100)];
    g.launch_delay_outliers = static_cast<uint64_t>(
        delays.end() - std::upper_bound(delays.begin(), delays.end(), kLaunchDelayOutlierNs));
  }
  for (auto& [_, s] : syncs) {
    g.sync_ns += s.total_ns;
    g.syncs.push_back(s);
  }
  std::sort(g.syncs.begin(), g.syncs.end(), [](const SyncPoint& a, const SyncPoint& b) { return a.total_ns > b.total_ns; });
  std::map<std::string, OpGpuTime> by_op;  // by name, as the list was built before the sort
  for (auto& [id, x] : by_op_id) {
    OpGpuTime& o = by_op[id == kNoOp ? std::string("(no operator)") : t.names[id]];
    o.op = id == kNoOp ? std::string("(no operator)") : t.names[id];
    o.gpu_ns += x.gpu_ns;
    o.kernels += x.kernels;
  }
  for (auto& [_, o] : by_op) g.gpu_time_by_op.push_back(o);
  for (auto& [_, l] : by_layer) g.gpu_time_by_layer.push_back(l);
  std::sort(g.gpu_time_by_layer.begin(), g.gpu_time_by_layer.end(), [](const LayerGpuTime& a, const LayerGpuTime& b) {
    return a.forward_ns + a.backward_ns > b.forward_ns + b.backward_ns;
  });
  std::sort(g.gpu_time_by_op.begin(), g.gpu_time_by_op.end(),
            [](const OpGpuTime& a, const OpGpuTime& b) { return a.gpu_ns > b.gpu_ns; });
  for (auto& [id, k] : kernels) {
    k.name = t.names[id];
    k.share = g.kernel_ns > 0 ? static_cast<double>(k.total_ns) / static_cast<double>(g.kernel_ns) : 0;
    k.tensor_cores = is_tensor_core_kernel(k.name);
    if (k.tensor_cores) {
      g.any_tensor_cores = true;
      g.tensor_core_ns += k.total_ns;
    }
    g.top_kernels.push_back(k);
  }
  std::sort(g.top_kernels.begin(), g.top_kernels.end(),
            [](const KernelStats& a, const KernelStats& b) { return a.total_ns > b.total_ns; });
  if (g.top_kernels.size() > top) g.top_kernels.resize(top);
  return g;
}

}  // namespace torchneck::gpu
