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

namespace {

constexpr uint32_t kNoOp = UINT32_MAX;

// A runtime call's outermost and innermost operator, as name ids: the
// "outer > inner" text is only built where it is shown.
struct CallContext {
  uint32_t outer = kNoOp, inner = kNoOp;
};

// Which layer, forward or backward, a runtime call's device work belongs to.
struct Attribution {
  std::string module;
  bool backward = false;
};

using ThreadKey = std::pair<int64_t, int64_t>;  // (pid, tid)

// gpu_facts in two passes over the trace: the first reads every event in
// time order (operators and modules open on each thread, runtime calls in
// their context, device work counted), the second joins device work to the
// call that launched it.
class GpuFactsBuilder {
 public:
  explicit GpuFactsBuilder(const Activities& t) : t_(t), context_of_(t.events.size()) {
    for (const auto& f : t.flows)
      if (f.cat == FlowKind::kFwdBwd) flows_.push_back(&f);
    std::stable_sort(flows_.begin(), flows_.end(),
                     [](const ActivityFlow* a, const ActivityFlow* b) { return a->ts_ns < b->ts_ns; });
  }

  GpuFacts build(size_t top) {
    device_facts();
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const Event& e : t_.events) {
      if (e.cat == Cat::kTrace) continue;
      while (next_flow_ < flows_.size() && flows_[next_flow_]->ts_ns < e.ts_ns) resolve_flow(*flows_[next_flow_++]);
      first = std::min(first, e.ts_ns);
      last = std::max(last, e.end_ns());
      read_event(e);
    }
    g_.span_ns = last > first ? last - first : 0;
    std::vector<int64_t> delays = join_device_work();
    launch_delays(std::move(delays));
    sorted_tables(top);
    return std::move(g_);
  }

 private:
  void device_facts() {
    if (!t_.devices.empty()) {
      g_.device_name = t_.devices.front().name;
      g_.device_memory = t_.devices.front().total_global_mem;
      g_.compute_major = t_.devices.front().compute_major;
    }
    if (!t_.device_memory.empty()) {
      const DeviceMemoryUse& m = t_.device_memory.begin()->second;
      g_.peak_allocated = m.peak_allocated;
      g_.peak_reserved = m.has_totals ? m.peak_reserved : -1;
      g_.peak_is_lower_bound = !m.has_totals;
    }
  }

  std::string context_text(CallContext c) const {
    if (c.outer == kNoOp) return "(no operator)";
    if (c.outer == c.inner) return t_.names[c.outer];
    return t_.names[c.outer] + " > " + t_.names[c.inner];
  }

  // The stack of what is open on a thread at TS: those ended before are popped.
  static std::vector<const Event*>& open_at(std::map<ThreadKey, std::vector<const Event*>>& by_thread,
                                            const Event& e) {
    auto& stack = by_thread[{e.pid, e.tid}];
    while (!stack.empty() && stack.back()->end_ns() <= e.ts_ns) stack.pop_back();
    return stack;
  }

  std::string innermost_module(int64_t pid, int64_t tid, int64_t ts) {
    auto it = modules_.find({pid, tid});
    if (it == modules_.end()) return {};
    auto& stack = it->second;
    while (!stack.empty() && stack.back()->end_ns() <= ts) stack.pop_back();
    return stack.empty() ? std::string() : t_.name_of(*stack.back()).substr(11);  // "nn.Module: "
  }

  // A forward-backward flow: its start names the forward op's module, its
  // end the backward node that inherits it.
  void resolve_flow(const ActivityFlow& f) {
    if (f.start) {
      const std::string m = innermost_module(f.pid, f.tid, f.ts_ns);
      if (!m.empty()) module_of_flow_[f.id] = m;
      return;
    }
    auto m = module_of_flow_.find(f.id);
    if (m == module_of_flow_.end()) return;
    auto it = open_.find({f.pid, f.tid});
    if (it == open_.end()) return;
    for (auto op = it->second.rbegin(); op != it->second.rend(); ++op)
      if ((*op)->end_ns() > f.ts_ns && starts_with(t_.name_of(**op), "autograd::engine::evaluate_function")) {
        module_of_backward_[*op] = m->second;
        break;
      }
  }

  void read_event(const Event& e) {
    const std::string& name = t_.name_of(e);
    if (e.cat == Cat::kPythonFunction && starts_with(name, "nn.Module: ")) {
      open_at(modules_, e).push_back(&e);
    } else if (e.cat == Cat::kCpuOp || e.cat == Cat::kUserAnnotation) {
      open_at(open_, e).push_back(&e);
    } else if (e.cat == Cat::kRuntime || e.cat == Cat::kDriver) {
      // cuda_sync events sit on the device's track and repeat what the
      // synchronising runtime call (matched by correlation) already says.
      read_runtime_call(e, name);
    } else if (is_gpu_work(e.cat)) {
      count_device_work(e, name);
    }
  }

  void read_runtime_call(const Event& e, const std::string& name) {
    const std::vector<const Event*>& stack = open_at(open_, e);
    // (An empty name counts as none, as it did when these were strings.)
    CallContext c;
    for (const Event* o : stack) {
      if (starts_with(t_.name_of(*o), "ProfilerStep#")) continue;
      if (c.outer == kNoOp || t_.names[c.outer].empty()) c.outer = o->name;
      c.inner = o->name;
    }
    if (c.outer != kNoOp && t_.names[c.outer].empty()) c.outer = kNoOp;
    Attribution a;
    for (const Event* o : stack) {
      auto b = module_of_backward_.find(o);
      if (b != module_of_backward_.end()) {
        a.module = b->second;
        a.backward = true;
      }
    }
    if (a.module.empty()) a.module = innermost_module(e.pid, e.tid, e.ts_ns);
    if (!a.module.empty()) layer_of_call_[&e] = std::move(a);
    if (e.correlation >= 0) runtime_by_corr_[e.correlation] = &e;
    if (launch_call(name)) {
      ++g_.launches;
      g_.launch_api_ns += e.dur_ns;
    }
    if (synchronising_call(name)) add_sync(name, context_text(c), e.dur_ns);
    context_of_[static_cast<size_t>(&e - t_.events.data())] = c;
  }

  void add_sync(const std::string& what, const std::string& context, int64_t dur_ns) {
    SyncPoint& s = syncs_[what + "\n" + context];
    s.what = what;
    s.context = context;
    ++s.calls;
    s.total_ns += dur_ns;
  }

  void count_device_work(const Event& e, const std::string& name) {
    if (e.cat == Cat::kKernel) {
      ++g_.kernels;
      g_.kernel_ns += e.dur_ns;
      if (e.dur_ns < kShortKernelNs) ++g_.short_kernels;
      KernelStats& k = kernels_[e.name];
      ++k.calls;
      k.total_ns += e.dur_ns;
      if (e.dur_ns >= longest_[e.name]) {
        longest_[e.name] = e.dur_ns;
        std::copy(e.grid, e.grid + 3, k.grid.begin());
        std::copy(e.block, e.block + 3, k.block.begin());
      }
    } else if (e.cat == Cat::kMemcpy) {
      g_.memcpy_ns += e.dur_ns;
      if (contains(name, "Pageable")) {
        ++g_.pageable_copies;
        g_.pageable_ns += e.dur_ns;
        g_.pageable_bytes += std::max<int64_t>(0, e.bytes);
      }
    } else {
      g_.memset_ns += e.dur_ns;
    }
  }

  // Device work back to the call that launched it: GPU time per operator
  // and per layer, device-to-host copies as sync points. Returns the
  // kernels' launch delays.
  std::vector<int64_t> join_device_work() {
    std::vector<int64_t> delays;
    for (const Event& e : t_.events) {
      if (!is_gpu_work(e.cat) || e.correlation < 0) continue;
      auto it = runtime_by_corr_.find(e.correlation);
      if (it == runtime_by_corr_.end()) continue;
      const Event& call = *it->second;
      if (e.cat == Cat::kKernel) delays.push_back(std::max<int64_t>(0, e.ts_ns - call.ts_ns));
      auto layer = layer_of_call_.find(&call);
      if (layer != layer_of_call_.end()) {
        LayerGpuTime& l = by_layer_[layer->second.module];
        l.module = layer->second.module;
        (layer->second.backward ? l.backward_ns : l.forward_ns) += e.dur_ns;
        l.kernels += e.cat == Cat::kKernel;
      }
      const CallContext& c = context_of_[static_cast<size_t>(&call - t_.events.data())];
      OpGpuTime& o = by_op_id_[c.outer];
      o.gpu_ns += e.dur_ns;
      o.kernels += e.cat == Cat::kKernel;
      const std::string& name = t_.name_of(e);
      if (e.cat == Cat::kMemcpy && contains(name, "DtoH")) add_sync(name, context_text(c), e.dur_ns);
    }
    return delays;
  }

  void launch_delays(std::vector<int64_t> delays) {
    if (delays.empty()) return;
    std::sort(delays.begin(), delays.end());
    g_.median_launch_delay_ns = delays[delays.size() / 2];
    g_.p99_launch_delay_ns = delays[std::min(delays.size() - 1, delays.size() * 99 / 100)];
    g_.launch_delay_outliers = static_cast<uint64_t>(
        delays.end() - std::upper_bound(delays.begin(), delays.end(), kLaunchDelayOutlierNs));
  }

  void sorted_tables(size_t top) {
    for (auto& [_, s] : syncs_) {
      g_.sync_ns += s.total_ns;
      g_.syncs.push_back(s);
    }
    std::sort(g_.syncs.begin(), g_.syncs.end(),
              [](const SyncPoint& a, const SyncPoint& b) { return a.total_ns > b.total_ns; });
    std::map<std::string, OpGpuTime> by_op;  // by name, as the list was built before the sort
    for (auto& [id, x] : by_op_id_) {
      OpGpuTime& o = by_op[id == kNoOp ? std::string("(no operator)") : t_.names[id]];
      o.op = id == kNoOp ? std::string("(no operator)") : t_.names[id];
      o.gpu_ns += x.gpu_ns;
      o.kernels += x.kernels;
    }
    for (auto& [_, o] : by_op) g_.gpu_time_by_op.push_back(o);
    for (auto& [_, l] : by_layer_) g_.gpu_time_by_layer.push_back(l);
    std::sort(g_.gpu_time_by_layer.begin(), g_.gpu_time_by_layer.end(),
              [](const LayerGpuTime& a, const LayerGpuTime& b) {
                return a.forward_ns + a.backward_ns > b.forward_ns + b.backward_ns;
              });
    std::sort(g_.gpu_time_by_op.begin(), g_.gpu_time_by_op.end(),
              [](const OpGpuTime& a, const OpGpuTime& b) { return a.gpu_ns > b.gpu_ns; });
    for (auto& [id, k] : kernels_) {
      k.name = t_.names[id];
      k.share = g_.kernel_ns > 0 ? static_cast<double>(k.total_ns) / static_cast<double>(g_.kernel_ns) : 0;
      k.tensor_cores = is_tensor_core_kernel(k.name);
      if (k.tensor_cores) {
        g_.any_tensor_cores = true;
        g_.tensor_core_ns += k.total_ns;
      }
      g_.top_kernels.push_back(k);
    }
    std::sort(g_.top_kernels.begin(), g_.top_kernels.end(),
              [](const KernelStats& a, const KernelStats& b) { return a.total_ns > b.total_ns; });
    if (g_.top_kernels.size() > top) g_.top_kernels.resize(top);
  }

  const Activities& t_;
  GpuFacts g_;
  // Per CPU thread: the open cpu_ops, to name the operator behind a runtime
  // call; the open module scopes, for layers.
  std::map<ThreadKey, std::vector<const Event*>> open_, modules_;
  std::unordered_map<int64_t, const Event*> runtime_by_corr_;
  std::vector<CallContext> context_of_;  // by runtime call's event index
  std::map<std::string, SyncPoint> syncs_;
  std::unordered_map<uint32_t, KernelStats> kernels_;
  std::unordered_map<uint32_t, int64_t> longest_;
  std::vector<const ActivityFlow*> flows_;  // forward-backward, in time order
  size_t next_flow_ = 0;
  std::unordered_map<int64_t, std::string> module_of_flow_;           // flow id -> forward op's module
  std::unordered_map<const Event*, std::string> module_of_backward_;  // backward op -> module
  std::unordered_map<const Event*, Attribution> layer_of_call_;
  std::unordered_map<uint32_t, OpGpuTime> by_op_id_;  // by the outer operator's name id
  std::map<std::string, LayerGpuTime> by_layer_;
};

}  // namespace

GpuFacts gpu_facts(const Run& run, size_t top) { return GpuFactsBuilder(run.activities).build(top); }

}  // namespace torchneck::gpu
