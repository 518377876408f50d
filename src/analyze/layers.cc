#include "analyze/layers.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <unordered_map>

#include "analyze/compiled.h"
#include "analyze/loop_spans.h"
#include "core/stats.h"

namespace torchneck {
namespace {

constexpr uint32_t kNoModule = 0xffffffffu;
constexpr uint32_t kNoCall = 0xffffffffu;

struct Point {
  int64_t t;
  int order;     // at equal times: exits (0) before op starts and launches (1) before enters (2)
  uint32_t ref;  // module index, or timeline index for op starts, or launch index
  bool launch = false;
};

// The backward node open on a thread at t: the latest-starting one that
// contains it (nodes nest only when one calls another's function).
struct BackwardSpans {
  std::vector<std::pair<int64_t, int64_t>> spans;  // (start, end), by start
  std::vector<size_t> index;                       // into Run::timeline
  size_t at(int64_t t) const {
    auto it = std::upper_bound(spans.begin(), spans.end(), std::make_pair(t, INT64_MAX));
    for (int k = 0; k < 8 && it != spans.begin(); ++k) {
      --it;
      if (it->second >= t) return index[static_cast<size_t>(it - spans.begin())];
    }
    return SIZE_MAX;
  }
};

using Evaluation = std::vector<std::pair<int64_t, int64_t>>;
// The innermost module open when a forward op made a backward node, and
// which call of it that was (LayerSweep::calls_).
struct Creator {
  int64_t op_start = 0;
  uint32_t module = kNoModule;
  uint32_t call = kNoCall;
};
// (forward thread id, seq nr) -> its creator
using Creators = std::map<std::pair<uint64_t, int64_t>, Creator>;

// One call of a module: its forward time, the backward time of the nodes it
// (or a module it called) created, and the call it was made in.
struct ModuleCall {
  uint32_t module = kNoModule;
  uint32_t parent = kNoCall;
  int64_t forward_ns = 0;
  int64_t backward_ns = 0;
  bool training = false;  // closed, outside evaluation passes and fetches
};

struct OpenCall {
  uint32_t module;
  int64_t entered_ns;
  uint32_t call;  // into LayerSweep::calls_
};

// Each module's row before any time is added: its name, type, size, depth.
std::vector<LayerStats> module_rows(const Run& run) {
  std::vector<LayerStats> stats(run.modules.size());
  for (uint32_t i = 0; i < run.modules.size(); ++i) {
    stats[i].module = i;
    stats[i].name = run.modules[i].name;
    stats[i].type = run.modules[i].type;
    stats[i].config = run.modules[i].config;
    stats[i].params = run.modules[i].params;
    stats[i].compiled = run.modules[i].compiled;
    int d = 0;
    for (int32_t p = run.modules[i].parent; p >= 0 && d < 256; p = run.modules[p].parent) ++d;
    stats[i].depth = d;
  }
  return stats;
}

// Every thread's backward nodes, by start.
std::unordered_map<uint32_t, BackwardSpans> backward_spans_of(const Run& run) {
  std::unordered_map<uint32_t, BackwardSpans> out;
  for (size_t i = 0; i < run.timeline.size(); ++i) {
    const OpEvent& e = run.timeline[i];
    if (e.kind != OpKind::kBackward) continue;
    BackwardSpans& b = out[e.thread_index];
    b.spans.emplace_back(e.start_ns, e.end_ns);
    b.index.push_back(i);
  }
  for (auto& [thread, b] : out) {
    std::vector<size_t> order(b.spans.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return b.spans[x].first < b.spans[y].first; });
    BackwardSpans sorted;
    for (size_t k : order) {
      sorted.spans.push_back(b.spans[k]);
      sorted.index.push_back(b.index[k]);
    }
    b = std::move(sorted);
  }
  return out;
}

// The layers' times, swept thread by thread: module enters and exits,
// forward-op starts and GPU launches in time order, each op start and
// launch seeing the innermost open module.
class LayerSweep {
 public:
  LayerSweep(const Run& run, const Evaluation& evaluation, const std::vector<GpuLaunch>* launches)
      : run_(run), evaluation_(evaluation), launches_(launches), stats_(module_rows(run)) {}

  LayerAnalysis analyse() {
    LayerAnalysis out;
    if (run_.modules.empty()) return out;
    add_module_and_op_points();
    if (launches_ != nullptr) {
      out.gpu = true;
      place_launches();
    }
    sweep_threads();
    attribute_backward(out);
    add_stalls();
    if (launches_ != nullptr) attribute_gpu(out);
    // A compiled module's children ran inside its compiled region, unseen:
    // it is not a leaf (heavy_layer must not name it as one layer).
    for (auto& s : stats_)
      if (s.compiled) s.leaf = false;
    mark_output_layers();
    for (auto& s : stats_)
      if (s.calls > 0 || s.backward_ns > 0 || s.eval_calls > 0) out.layers.push_back(std::move(s));
    std::sort(out.layers.begin(), out.layers.end(), [](const LayerStats& a, const LayerStats& b) {
      if (a.combined() != b.combined()) return a.combined() > b.combined();
      return a.name < b.name;
    });
    return out;
  }

 private:
  // Each root's output layer: of the leaves with parameters it called in
  // training, the one it called first last (modules are indexed in
  // first-call order).
  void mark_output_layers() {
    std::unordered_map<uint32_t, uint32_t> last_of_root;
    for (uint32_t i = 0; i < stats_.size(); ++i) {
      const LayerStats& s = stats_[i];
      if (!s.leaf || s.depth == 0 || s.params <= 0 || s.calls == 0) continue;
      uint32_t root = i;
      for (int d = 0; run_.modules[root].parent >= 0 && d < 256; ++d)
        root = static_cast<uint32_t>(run_.modules[root].parent);
      last_of_root[root] = i;
    }
    for (const auto& [root, module] : last_of_root) stats_[module].output_layer = true;
  }

  void add_module_and_op_points() {
    for (const ModuleEvent& e : run_.module_events)
      points_[e.thread_index].push_back({e.t_ns, e.is_exit ? 0 : 2, e.module});
    for (size_t i = 0; i < run_.timeline.size(); ++i) {
      const OpEvent& e = run_.timeline[i];
      if (e.kind == OpKind::kOperator && e.seq_nr >= 0)
        points_[e.thread_index].push_back({e.start_ns, 1, static_cast<uint32_t>(i)});
    }
  }

  // GPU launches: inside a backward node, its creator's (attribute_gpu);
  // else the innermost module open on their thread (the sweep).
  void place_launches() {
    const std::unordered_map<uint32_t, BackwardSpans> backward_spans = backward_spans_of(run_);
    launch_node_.assign(launches_->size(), SIZE_MAX);
    launch_module_.assign(launches_->size(), kNoModule);
    for (size_t i = 0; i < launches_->size(); ++i) {
      const GpuLaunch& l = (*launches_)[i];
      auto b = backward_spans.find(l.thread_index);
      if (b != backward_spans.end()) launch_node_[i] = b->second.at(l.t_ns);
      if (launch_node_[i] == SIZE_MAX && !inside_any(evaluation_, l.t_ns, l.t_ns))
        points_[l.thread_index].push_back({l.t_ns, 1, static_cast<uint32_t>(i), true});
    }
  }

  void sweep_threads() {
    const std::vector<Span> fetches = fetch_spans(run_);
    for (auto& [thread, pts] : points_) {
      std::stable_sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) {
        return a.t != b.t ? a.t < b.t : a.order < b.order;
      });
      std::vector<OpenCall> stack;
      for (const Point& p : pts) {
        if (p.order == 2) {
          const uint32_t call = static_cast<uint32_t>(calls_.size());
          calls_.push_back({p.ref, stack.empty() ? kNoCall : stack.back().call});
          stack.push_back({p.ref, p.t, call});
          if (stack.size() >= 2) stats_[stack[stack.size() - 2].module].leaf = false;
        } else if (p.order == 0) {
          close_module(p, thread == run_.main_thread ? &fetches : nullptr, stack);
        } else if (p.launch) {
          if (!stack.empty()) launch_module_[p.ref] = stack.back().module;
        } else {
          const OpEvent& e = run_.timeline[p.ref];
          const Creator made = stack.empty() ? Creator{e.start_ns} : Creator{e.start_ns, stack.back().module, stack.back().call};
          // Several ops can carry one sequence number (aten::linear peeks the
          // number aten::addmm then takes): the latest-starting one made the node.
          auto [it, inserted] = creators_.try_emplace({e.forward_tid, e.seq_nr}, made);
          if (!inserted && e.start_ns >= it->second.op_start) it->second = made;
        }
      }
    }
  }

  // A module's exit: its call's time to training, to evaluation, or (in
  // the main thread's fetches, FETCHES) to neither.
  void close_module(const Point& p, const std::vector<Span>* fetches, std::vector<OpenCall>& stack) {
    auto it = std::find_if(stack.rbegin(), stack.rend(), [&](const OpenCall& c) { return c.module == p.ref; });
    if (it == stack.rend()) return;
    const size_t pos = static_cast<size_t>(stack.rend() - it) - 1;
    const int64_t entered = stack[pos].entered_ns;
    if (fetches != nullptr && inside_any(*fetches, entered, p.t)) {
      // the loader's transforms: data work, not the model's layers
    } else if (inside_any(evaluation_, entered, p.t)) {
      stats_[p.ref].eval_calls += 1;
      stats_[p.ref].eval_forward_ns += p.t - entered;
    } else {
      stats_[p.ref].calls += 1;
      stats_[p.ref].forward_ns += p.t - entered;
      calls_[stack[pos].call].forward_ns = p.t - entered;
      calls_[stack[pos].call].training = true;
    }
    stack.resize(pos);  // also closes scopes whose forward raised
  }

  // Backward nodes that run while torch.compile compiles (inductor traces
  // its patterns' forward and backward on small real tensors, their forward
  // ops inside the compiled module's call) are compile work, not a layer's
  // backward: the module's forward span already holds them.
  bool in_compilation(const OpEvent& e) const {
    if (compiling_.empty()) return false;
    auto it = std::upper_bound(compiling_.begin(), compiling_.end(), std::make_pair(e.start_ns, INT64_MAX));
    return it != compiling_.begin() && std::prev(it)->second >= e.end_ns;
  }

  // Each backward node's time to its creator's module and the modules above it.
  void attribute_backward(LayerAnalysis& out) {
    std::vector<int64_t> own_backward(run_.modules.size(), 0);
    for (const OpEvent& e : run_.timeline) {
      if (e.kind != OpKind::kBackward) continue;
      const int64_t d = e.end_ns - e.start_ns;
      if (in_compilation(e)) {
        out.backward_unattributed_ns += d;
        continue;
      }
      auto it = creators_.find({e.forward_tid, e.seq_nr});
      if (it == creators_.end() || it->second.module == kNoModule) {
        out.backward_unattributed_ns += d;
        continue;
      }
      own_backward[it->second.module] += d;
      out.backward_attributed_ns += d;
      int guard = 0;
      for (uint32_t c = it->second.call; c != kNoCall && guard++ < 256; c = calls_[c].parent) calls_[c].backward_ns += d;
    }
    for (uint32_t i = 0; i < run_.modules.size(); ++i) {
      int guard = 0;
      for (int32_t m = static_cast<int32_t>(i); m >= 0 && guard++ < 256; m = run_.modules[m].parent)
        stats_[m].backward_ns += own_backward[i];
    }
  }

  // Each module's stalled_ns: its training calls' time beyond
  // kStalledCallFactor times its median call.
  void add_stalls() {
    std::vector<std::vector<int64_t>> per_module(stats_.size());
    for (const ModuleCall& c : calls_)
      if (c.training) per_module[c.module].push_back(c.forward_ns + c.backward_ns);
    for (uint32_t m = 0; m < per_module.size(); ++m) {
      const std::vector<int64_t>& times = per_module[m];
      if (times.size() < kMinCallsForStalls) continue;
      const double cap = kStalledCallFactor * static_cast<double>(middle_value(times));
      for (int64_t t : times)
        if (static_cast<double>(t) > cap) stats_[m].stalled_ns += t - static_cast<int64_t>(cap);
    }
  }

  // Each launch's device time to its module (forward) or its backward
  // node's creator's, and the modules above it.
  void attribute_gpu(LayerAnalysis& out) {
    for (auto& s : stats_) s.gpu_forward_ns = s.gpu_backward_ns = 0;
    for (size_t i = 0; i < launches_->size(); ++i) {
      const int64_t d = (*launches_)[i].device_ns;
      uint32_t module = kNoModule;
      bool backward = false;
      if (launch_node_[i] != SIZE_MAX) {
        const OpEvent& node = run_.timeline[launch_node_[i]];
        auto it = creators_.find({node.forward_tid, node.seq_nr});
        backward = true;
        if (it != creators_.end() && !in_compilation(node)) module = it->second.module;
      } else {
        module = launch_module_[i];
      }
      if (module == kNoModule) {
        out.gpu_unattributed_ns += d;
        continue;
      }
      out.gpu_attributed_ns += d;
      int guard = 0;
      for (int32_t m = static_cast<int32_t>(module); m >= 0 && guard++ < 256; m = run_.modules[m].parent) {
        (backward ? stats_[m].gpu_backward_ns : stats_[m].gpu_forward_ns) += d;
        ++stats_[m].gpu_launches;
      }
    }
  }

  const Run& run_;
  const Evaluation& evaluation_;
  const std::vector<GpuLaunch>* launches_;
  std::vector<LayerStats> stats_;
  std::unordered_map<uint32_t, std::vector<Point>> points_;  // per thread
  std::vector<size_t> launch_node_;     // per launch: its backward node, SIZE_MAX for none
  std::vector<uint32_t> launch_module_;  // per launch in forward: the module open, kNoModule for none
  Creators creators_;
  std::vector<ModuleCall> calls_;  // every module call, in the order entered
  const std::vector<std::pair<int64_t, int64_t>> compiling_ = compile_spans(run_);
};

}  // namespace

LayerAnalysis analyze_layers(const Run& run, const Evaluation& evaluation, const std::vector<GpuLaunch>* launches) {
  return LayerSweep(run, evaluation, launches).analyse();
}

}  // namespace torchneck
