// The TensorBoard plugin's Kernel and Operator tables (see tbplugin.h).
// "Plugin" is pytorch/kineto at 94979607^, tb_plugin/torch_tb_profiler/.
#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "analyze/gpu/tbplugin.h"
#include "analyze/gpu/tbplugin_internal.h"

namespace torchneck::gpu {

using Cat = ActivityKind;
using Event = Activity;
using Trace = Activities;
using namespace tb_detail;

// tensor_core.py TC_Allowlist: a kernel uses Tensor Cores when its name
// contains one of these (from NVIDIA PyProf).
bool tb_tensor_core_kernel(const std::string& name) {
  static constexpr std::string_view kPatterns[] = {
      "h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816", "dgrad_1x1_stride_2x2",
      "first_layer_wgrad_kernel", "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
      "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm", "c1688"};
  for (auto p : kPatterns)
    if (name.find(p) != std::string::npos) return true;
  return false;
}

// kernel_parser.py KernelParser.parse_events: every kernel event grouped by
// name; count, sum, mean, max, min of the duration; blocks per SM and
// occupancy averaged with the durations as weights, missing values as 0
// (fillna(0)), 0 when the weights sum to 0 (ZeroDivisionError); sorted by
// sum, largest first.
std::vector<TbKernelStat> tb_kernel_stats(const Run& run) {
  const Trace& t = run.activities;
  std::unordered_map<uint32_t, size_t> by_name;
  std::vector<TbKernelStat> out;
  std::vector<std::pair<double, double>> weighted;  // sum(bps * dur), sum(occ * dur)
  for (const Event& e : t.events) {
    if (e.cat != Cat::kKernel) continue;
    auto [it, fresh] = by_name.try_emplace(e.name, out.size());
    if (fresh) {
      TbKernelStat k;
      k.name = t.name_of(e);
      k.tensor_cores = tb_tensor_core_kernel(k.name);
      k.min_ns = e.dur_ns;
      out.push_back(std::move(k));
      weighted.emplace_back(0.0, 0.0);
    }
    TbKernelStat& k = out[it->second];
    ++k.calls;
    k.total_ns += e.dur_ns;
    k.max_ns = std::max(k.max_ns, e.dur_ns);
    k.min_ns = std::min(k.min_ns, e.dur_ns);
    const double dur = static_cast<double>(e.dur_ns);
    if (e.blocks_per_sm >= 0) weighted[it->second].first += e.blocks_per_sm * dur;
    if (e.est_occupancy >= 0) weighted[it->second].second += e.est_occupancy * dur;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    TbKernelStat& k = out[i];
    k.mean_ns = static_cast<double>(k.total_ns) / static_cast<double>(k.calls);
    if (k.total_ns > 0) {
      k.blocks_per_sm = weighted[i].first / static_cast<double>(k.total_ns);
      k.occupancy = weighted[i].second / static_cast<double>(k.total_ns);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const TbKernelStat& a, const TbKernelStat& b) { return a.total_ns > b.total_ns; });
  return out;
}

// tensor_core.py TC_OP_Allowlist: ops eligible for Tensor Cores (exact names).
static bool tc_eligible_op(std::string_view name) {
  static constexpr std::string_view kOps[] = {
      "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_tbc",
      "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::convolution",
      "aten::cudnn_convolution", "aten::cudnn_convolution_transpose", "aten::prelu", "aten::addmm", "aten::addmv",
      "aten::addr", "aten::matmul", "aten::mm", "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm",
      "aten::bmm", "aten::chain_matmul", "aten::linalg_multi_dot", "aten::_thnn_fused_lstm_cell",
      "aten::_thnn_fused_gru_cell", "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell",
      "aten::rnn_relu_cell", "CudnnConvolutionBackward", "BmmBackward0",
      "aten::cudnn_convolution_transpose_backward", "CudnnConvolutionTransposeBackward", "MmBackward",
      "aten::cudnn_convolution_backward_weight", "aten::addmm_", "AddmvBackward", "MvBackward",
      "aten::cudnn_convolution_transpose_backward_weight", "aten::cudnn_convolution_transpose_backward_input",
      "AddmmBackward", "aten::cudnn_convolution_backward_input", "AddbmmBackward", "aten::cudnn_convolution_backward"};
  for (auto k : kOps)
    if (name == k) return true;
  return false;
}

std::vector<TbOpStat> tb_op_stats(const Run& run) {
  const Trace& t = run.activities;
  const std::vector<Ty> types = types_of(t);
  const Correlated c = correlate(t, types);

  // node.py classes, as create_operator_node / _parse_node pick them. Only
  // kOperator nodes of event type OPERATOR are table rows (is_operator_node).
  enum class Kind : uint8_t { kOperator, kProfilerStep, kDataLoader, kOptimizer };
  struct Node {
    uint32_t event;
    Kind kind;
    int64_t start, end;
    std::vector<uint32_t> children, runtimes;
    int64_t device = 0, self_device = 0, self_host = 0, tc_self = 0, tc_total = 0;
    bool tc_eligible = false;
  };
  std::vector<Node> nodes;
  std::vector<int64_t> tid_order;  // tid2list's keys, first seen first
  std::unordered_map<int64_t, std::vector<uint32_t>> tid2list;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Ty ty = types[i];
    const Event& e = t.events[i];
    const std::string& name = t.name_of(e);
    Kind kind;
    if (ty == Ty::kProfilerStep) {
      kind = Kind::kProfilerStep;
    } else if (ty == Ty::kOperator || ty == Ty::kUserAnnotation) {
      if (is_dataloader_name(name)) kind = Kind::kDataLoader;
      else if (starts_with(name, "Optimizer.step")) kind = Kind::kOptimizer;
      else if (ty == Ty::kUserAnnotation && !is_comm_op_name(name)) continue;  // create_operator_node -> None
      else kind = Kind::kOperator;
    } else {
      continue;  // python_function: a ModuleNode only with "Python module id", which the model lacks
    }
    auto [it, fresh] = tid2list.try_emplace(e.tid);
    if (fresh) tid_order.push_back(e.tid);
    it->second.push_back(static_cast<uint32_t>(nodes.size()));
    nodes.push_back({static_cast<uint32_t>(i), kind, e.ts_ns, e.end_ns(), {}, {}});
  }

  // parse_nodes: "associate CUDA Runtimes with CPU events": all runtimes with
  // an External id go to the first op (thread by thread, in event order)
  // with that id. (Runtimes with id 0, and kernels no runtime launched, also
  // go to each thread's root, which is no row: left out here.)
  {
    std::unordered_map<int64_t, std::vector<uint32_t>> ext_to_rt;
    for (uint32_t r = 0; r < c.rts.size(); ++r) ext_to_rt[c.rts[r].ext].push_back(r);
    for (int64_t tid : tid_order)
      for (uint32_t n : tid2list[tid]) {
        auto it = ext_to_rt.find(t.events[nodes[n].event].external_id);
        if (it != ext_to_rt.end()) {
          nodes[n].runtimes = std::move(it->second);
          ext_to_rt.erase(it);
        }
      }
  }
  std::vector<int64_t> rt_dev(c.rts.size(), 0), rt_tc(c.rts.size(), 0);  // RuntimeNode.fill_stats
  for (uint32_t r = 0; r < c.rts.size(); ++r)
    for (uint32_t d : c.rts[r].devs) {
      const int64_t dur = c.devs[d].end - c.devs[d].start;
      rt_dev[r] += dur;
      if (tb_tensor_core_kernel(t.name_of(t.events[c.devs[d].event]))) rt_tc[r] += dur;
    }

  auto is_op_type = [&](uint32_t n) { return types[nodes[n].event] == Ty::kOperator; };
  auto name_of = [&](uint32_t n) -> const std::string& { return t.name_of(t.events[nodes[n].event]); };

  std::vector<uint32_t> ops;  // get_operator_and_kernels: post-order, thread by thread
  for (int64_t tid : tid_order) {
    std::vector<uint32_t>& list = tid2list[tid];
    // _build_tree: by (start, -end), stably.
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return nodes[a].start != nodes[b].start ? nodes[a].start < nodes[b].start : nodes[a].end > nodes[b].end;
    });
    // build_tree_relationship: nest by time; a node crossing its parent's
    // end is dropped ("ranges on the same thread should not intersect").
    std::vector<uint32_t> root_children;
    std::vector<uint32_t> stack;
    for (uint32_t n : list) {
      for (;;) {
        const int64_t tail_end = stack.empty() ? kMax : nodes[stack.back()].end;
        if (nodes[n].start < tail_end) {
          if (nodes[n].end <= tail_end) {
            (stack.empty() ? root_children : nodes[stack.back()].children).push_back(n);
            stack.push_back(n);
          }
          break;
        }
        stack.pop_back();
      }
    }
    // remove_dup_nodes: an OPERATOR whose only child is an OPERATOR of the
    // same name takes that child's children and runtimes (its own runtimes
    // are dropped, as in torch.autograd.profiler).
    std::vector<uint32_t> todo(root_children.rbegin(), root_children.rend());
    while (!todo.empty()) {
      const uint32_t n = todo.back();
      todo.pop_back();
      while (nodes[n].children.size() == 1) {
        const uint32_t ch = nodes[n].children[0];
        if (!(name_of(n) == name_of(ch) && is_op_type(n) && is_op_type(ch))) break;
        std::vector<uint32_t> grand = std::move(nodes[ch].children);
        nodes[n].runtimes = std::move(nodes[ch].runtimes);
        nodes[n].children = std::move(grand);
      }
      for (auto it = nodes[n].children.rbegin(); it != nodes[n].children.rend(); ++it) todo.push_back(*it);
    }
    // fill_stats, post-order; collect the operator rows in the same order.
    std::vector<std::pair<uint32_t, size_t>> st;
    for (uint32_t top : root_children) {
      st.push_back({top, 0});
      while (!st.empty()) {
        auto& [n, next] = st.back();
        if (next < nodes[n].children.size()) {
          const uint32_t ch = nodes[n].children[next++];
          st.push_back({ch, 0});
          continue;
        }
        Node& x = nodes[n];
        const bool op_type = is_op_type(n);
        x.tc_eligible = tc_eligible_op(name_of(n));
        x.self_host = x.end - x.start;
        for (uint32_t ch : x.children) {
          const Node& y = nodes[ch];
          x.device += y.device;
          x.self_host -= y.end - y.start;
          x.tc_total += y.tc_total;
          if (op_type && !x.tc_eligible && y.tc_eligible) x.tc_eligible = true;
        }
        for (uint32_t r : x.runtimes) {
          // "From PyTorch 1.8 RC1, cpu_self_time does not include runtime's time."
          x.self_host -= c.rts[r].end - c.rts[r].start;
          x.device += rt_dev[r];
          x.self_device += rt_dev[r];
          x.tc_self += rt_tc[r];
          x.tc_total += rt_tc[r];
          if (op_type && !x.tc_eligible && rt_tc[r] > 0) x.tc_eligible = true;
        }
        // node.py is_operator_node.
        const std::string& nm = name_of(n);
        if (x.kind == Kind::kOperator && op_type && nm != "DataParallel.forward" &&
            nm != "DistributedDataParallel.forward" && !starts_with(nm, "Optimizer."))
          ops.push_back(n);
        st.pop_back();
      }
    }
  }

  // aggregate_ops keyed by name; OperatorAgg.tc_eligible is the first op's.
  std::vector<TbOpStat> out;
  std::vector<std::pair<int64_t, int64_t>> tc;  // tc_self, tc_total sums
  std::unordered_map<std::string_view, size_t> by_name;
  for (uint32_t n : ops) {
    const Node& x = nodes[n];
    auto [it, fresh] = by_name.try_emplace(name_of(n), out.size());
    if (fresh) {
      TbOpStat s;
      s.name = name_of(n);
      s.tc_eligible = x.tc_eligible;
      out.push_back(std::move(s));
      tc.emplace_back(0, 0);
    }
    TbOpStat& s = out[it->second];
    ++s.calls;
    s.host_total_ns += x.end - x.start;
    s.host_self_ns += x.self_host;
    s.device_total_ns += x.device;
    s.device_self_ns += x.self_device;
    tc[it->second].first += x.tc_self;
    tc[it->second].second += x.tc_total;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    TbOpStat& s = out[i];
    s.tc_self_ratio = s.device_self_ns > 0 ? static_cast<double>(tc[i].first) / static_cast<double>(s.device_self_ns) : 0;
    s.tc_total_ratio = s.device_total_ns > 0 ? static_cast<double>(tc[i].second) / static_cast<double>(s.device_total_ns) : 0;
  }
  // _generate_op_table: sorted by device self time when the trace has
  // kernels (not only communication ones) or memcpy / memset, else by host
  // self time; stably.
  const auto comm = comm_external_ids(t, types);
  bool show_gpu = false;
  for (size_t i = 0; i < t.events.size() && !show_gpu; ++i)
    show_gpu = types[i] == Ty::kMemcpy || types[i] == Ty::kMemset ||
               (types[i] == Ty::kKernel && !comm.count(t.events[i].external_id));
  std::stable_sort(out.begin(), out.end(), [&](const TbOpStat& a, const TbOpStat& b) {
    return show_gpu ? a.device_self_ns > b.device_self_ns : a.host_self_ns > b.host_self_ns;
  });
  return out;
}

}  // namespace torchneck::gpu
