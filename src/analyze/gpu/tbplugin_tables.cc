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

namespace {

// node.py classes, as create_operator_node / _parse_node pick them. Only
// kOperator nodes of event type OPERATOR are table rows (is_operator_node).
enum class NodeKind : uint8_t { kOperator, kProfilerStep, kDataLoader, kOptimizer };

struct OpNode {
  uint32_t event;
  NodeKind kind;
  int64_t start, end;
  std::vector<uint32_t> children, runtimes;
  int64_t device = 0, self_device = 0, self_host = 0, tc_self = 0, tc_total = 0;
  bool tc_eligible = false;
};

// The plugin's operator tree, thread by thread (event_parser.py, node.py),
// and its operator table (op_agg.py).
class TbOpTree {
 public:
  explicit TbOpTree(const Trace& t) : t_(t), types_(types_of(t)), c_(correlate(t, types_)) {}

  std::vector<TbOpStat> table() {
    make_nodes();
    attach_runtimes();
    runtime_device_times();
    std::vector<uint32_t> ops;  // get_operator_and_kernels: post-order, thread by thread
    for (int64_t tid : tid_order_) {
      const std::vector<uint32_t> roots = build_tree(tid2list_[tid]);
      remove_dup_nodes(roots);
      fill_stats(roots, ops);
    }
    return aggregate(ops);
  }

 private:
  bool is_op_type(uint32_t n) const { return types_[nodes_[n].event] == Ty::kOperator; }
  const std::string& name_of(uint32_t n) const { return t_.name_of(t_.events[nodes_[n].event]); }

  void make_nodes() {
    for (size_t i = 0; i < t_.events.size(); ++i) {
      const Ty ty = types_[i];
      const Event& e = t_.events[i];
      const std::string& name = t_.name_of(e);
      NodeKind kind;
      if (ty == Ty::kProfilerStep) {
        kind = NodeKind::kProfilerStep;
      } else if (ty == Ty::kOperator || ty == Ty::kUserAnnotation) {
        if (is_dataloader_name(name)) kind = NodeKind::kDataLoader;
        else if (starts_with(name, "Optimizer.step")) kind = NodeKind::kOptimizer;
        else if (ty == Ty::kUserAnnotation && !is_comm_op_name(name)) continue;  // create_operator_node -> None
        else kind = NodeKind::kOperator;
      } else {
        continue;  // python_function: a ModuleNode only with "Python module id", which the model lacks
      }
      auto [it, fresh] = tid2list_.try_emplace(e.tid);
      if (fresh) tid_order_.push_back(e.tid);
      it->second.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back({static_cast<uint32_t>(i), kind, e.ts_ns, e.end_ns(), {}, {}});
    }
  }

  // parse_nodes: "associate CUDA Runtimes with CPU events": all runtimes with
  // an External id go to the first op (thread by thread, in event order)
  // with that id. (Runtimes with id 0, and kernels no runtime launched, also
  // go to each thread's root, which is no row: left out here.)
  void attach_runtimes() {
    std::unordered_map<int64_t, std::vector<uint32_t>> ext_to_rt;
    for (uint32_t r = 0; r < c_.rts.size(); ++r) ext_to_rt[c_.rts[r].ext].push_back(r);
    for (int64_t tid : tid_order_)
      for (uint32_t n : tid2list_[tid]) {
        auto it = ext_to_rt.find(t_.events[nodes_[n].event].external_id);
        if (it != ext_to_rt.end()) {
          nodes_[n].runtimes = std::move(it->second);
          ext_to_rt.erase(it);
        }
      }
  }

  void runtime_device_times() {  // RuntimeNode.fill_stats
    rt_dev_.assign(c_.rts.size(), 0);
    rt_tc_.assign(c_.rts.size(), 0);
    for (uint32_t r = 0; r < c_.rts.size(); ++r)
      for (uint32_t d : c_.rts[r].devs) {
        const int64_t dur = c_.devs[d].end - c_.devs[d].start;
        rt_dev_[r] += dur;
        if (tb_tensor_core_kernel(t_.name_of(t_.events[c_.devs[d].event]))) rt_tc_[r] += dur;
      }
  }

  // _build_tree: by (start, -end), stably; build_tree_relationship: nest by
  // time, a node crossing its parent's end dropped ("ranges on the same
  // thread should not intersect"). Returns the root's children.
  std::vector<uint32_t> build_tree(std::vector<uint32_t>& list) {
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return nodes_[a].start != nodes_[b].start ? nodes_[a].start < nodes_[b].start : nodes_[a].end > nodes_[b].end;
    });
    std::vector<uint32_t> root_children;
    std::vector<uint32_t> stack;
    for (uint32_t n : list) {
      for (;;) {
        const int64_t tail_end = stack.empty() ? kMax : nodes_[stack.back()].end;
        if (nodes_[n].start < tail_end) {
          if (nodes_[n].end <= tail_end) {
            (stack.empty() ? root_children : nodes_[stack.back()].children).push_back(n);
            stack.push_back(n);
          }
          break;
        }
        stack.pop_back();
      }
    }
    return root_children;
  }

  // remove_dup_nodes: an OPERATOR whose only child is an OPERATOR of the
  // same name takes that child's children and runtimes (its own runtimes
  // are dropped, as in torch.autograd.profiler).
  void remove_dup_nodes(const std::vector<uint32_t>& roots) {
    std::vector<uint32_t> todo(roots.rbegin(), roots.rend());
    while (!todo.empty()) {
      const uint32_t n = todo.back();
      todo.pop_back();
      while (nodes_[n].children.size() == 1) {
        const uint32_t ch = nodes_[n].children[0];
        if (!(name_of(n) == name_of(ch) && is_op_type(n) && is_op_type(ch))) break;
        std::vector<uint32_t> grand = std::move(nodes_[ch].children);
        nodes_[n].runtimes = std::move(nodes_[ch].runtimes);
        nodes_[n].children = std::move(grand);
      }
      for (auto it = nodes_[n].children.rbegin(); it != nodes_[n].children.rend(); ++it) todo.push_back(*it);
    }
  }

  // fill_stats, post-order; the operator rows collected in the same order.
  void fill_stats(const std::vector<uint32_t>& roots, std::vector<uint32_t>& ops) {
    std::vector<std::pair<uint32_t, size_t>> st;
    for (uint32_t top : roots) {
      st.push_back({top, 0});
      while (!st.empty()) {
        auto& [n, next] = st.back();
        if (next < nodes_[n].children.size()) {
          const uint32_t ch = nodes_[n].children[next++];
          st.push_back({ch, 0});
          continue;
        }
        fill_node(n);
        // node.py is_operator_node.
        const std::string& nm = name_of(n);
        if (nodes_[n].kind == NodeKind::kOperator && is_op_type(n) && nm != "DataParallel.forward" &&
            nm != "DistributedDataParallel.forward" && !starts_with(nm, "Optimizer."))
          ops.push_back(n);
        st.pop_back();
      }
    }
  }

  void fill_node(uint32_t n) {
    OpNode& x = nodes_[n];
    const bool op_type = is_op_type(n);
    x.tc_eligible = tc_eligible_op(name_of(n));
    x.self_host = x.end - x.start;
    for (uint32_t ch : x.children) {
      const OpNode& y = nodes_[ch];
      x.device += y.device;
      x.self_host -= y.end - y.start;
      x.tc_total += y.tc_total;
      if (op_type && !x.tc_eligible && y.tc_eligible) x.tc_eligible = true;
    }
    for (uint32_t r : x.runtimes) {
      // "From PyTorch 1.8 RC1, cpu_self_time does not include runtime's time."
      x.self_host -= c_.rts[r].end - c_.rts[r].start;
      x.device += rt_dev_[r];
      x.self_device += rt_dev_[r];
      x.tc_self += rt_tc_[r];
      x.tc_total += rt_tc_[r];
      if (op_type && !x.tc_eligible && rt_tc_[r] > 0) x.tc_eligible = true;
    }
  }

  // aggregate_ops keyed by name; OperatorAgg.tc_eligible is the first op's.
  // _generate_op_table: sorted by device self time when the trace has
  // kernels (not only communication ones) or memcpy / memset, else by host
  // self time; stably.
  std::vector<TbOpStat> aggregate(const std::vector<uint32_t>& ops) const {
    std::vector<TbOpStat> out;
    std::vector<std::pair<int64_t, int64_t>> tc;  // tc_self, tc_total sums
    std::unordered_map<std::string_view, size_t> by_name;
    for (uint32_t n : ops) {
      const OpNode& x = nodes_[n];
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
      s.tc_total_ratio =
          s.device_total_ns > 0 ? static_cast<double>(tc[i].second) / static_cast<double>(s.device_total_ns) : 0;
    }
    const auto comm = comm_external_ids(t_, types_);
    bool show_gpu = false;
    for (size_t i = 0; i < t_.events.size() && !show_gpu; ++i)
      show_gpu = types_[i] == Ty::kMemcpy || types_[i] == Ty::kMemset ||
                 (types_[i] == Ty::kKernel && !comm.count(t_.events[i].external_id));
    std::stable_sort(out.begin(), out.end(), [&](const TbOpStat& a, const TbOpStat& b) {
      return show_gpu ? a.device_self_ns > b.device_self_ns : a.host_self_ns > b.host_self_ns;
    });
    return out;
  }

  const Trace& t_;
  const std::vector<Ty> types_;
  const Correlated c_;
  std::vector<OpNode> nodes_;
  std::vector<int64_t> tid_order_;  // tid2list's keys, first seen first
  std::unordered_map<int64_t, std::vector<uint32_t>> tid2list_;
  std::vector<int64_t> rt_dev_, rt_tc_;
};

}  // namespace

std::vector<TbOpStat> tb_op_stats(const Run& run) { return TbOpTree(run.activities).table(); }

}  // namespace torchneck::gpu
