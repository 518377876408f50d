#include "analyze/layers.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <unordered_map>

#include "analyze/compiled.h"
#include "analyze/loop_spans.h"

namespace torchneck {
namespace {

constexpr uint32_t kNoModule = 0xffffffffu;

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

}  // namespace

LayerAnalysis analyze_layers(const Run& run, const std::vector<std::pair<int64_t, int64_t>>& evaluation,
                             const std::vector<GpuLaunch>* launches) {
  LayerAnalysis out;
  const size_t nm = run.modules.size();
  if (nm == 0) return out;
  std::vector<LayerStats> stats(nm);
  for (uint32_t i = 0; i < nm; ++i) {
    stats[i].module = i;
    stats[i].name = run.modules[i].name;
    stats[i].type = run.modules[i].type;
    stats[i].params = run.modules[i].params;
    stats[i].compiled = run.modules[i].compiled;
    int d = 0;
    for (int32_t p = run.modules[i].parent; p >= 0 && d < 256; p = run.modules[p].parent) ++d;
    stats[i].depth = d;
  }

  // Per thread, sweep module enter/exit and forward-op starts in time order:
  // each op start sees the innermost open module.
  std::unordered_map<uint32_t, std::vector<Point>> points;
  for (const ModuleEvent& e : run.module_events)
    points[e.thread_index].push_back({e.t_ns, e.is_exit ? 0 : 2, e.module});
  for (size_t i = 0; i < run.timeline.size(); ++i) {
    const OpEvent& e = run.timeline[i];
    if (e.kind == OpKind::kOperator && e.seq_nr >= 0)
      points[e.thread_index].push_back({e.start_ns, 1, static_cast<uint32_t>(i)});
  }
  // GPU launches: inside a backward node, its creator's (below); else the
  // innermost module open on their thread.
  std::unordered_map<uint32_t, BackwardSpans> backward_spans;
  std::vector<size_t> launch_node;  // per launch: its backward node, SIZE_MAX for none
  std::vector<uint32_t> launch_module;  // per launch in forward: the module open, kNoModule for none
  if (launches != nullptr) {
    out.gpu = true;
    for (size_t i = 0; i < run.timeline.size(); ++i) {
      const OpEvent& e = run.timeline[i];
      if (e.kind != OpKind::kBackward) continue;
      BackwardSpans& b = backward_spans[e.thread_index];
      b.spans.emplace_back(e.start_ns, e.end_ns);
      b.index.push_back(i);
    }
    for (auto& [thread, b] : backward_spans) {
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
    launch_node.assign(launches->size(), SIZE_MAX);
    launch_module.assign(launches->size(), kNoModule);
    for (size_t i = 0; i < launches->size(); ++i) {
      const GpuLaunch& l = (*launches)[i];
      auto b = backward_spans.find(l.thread_index);
      if (b != backward_spans.end()) launch_node[i] = b->second.at(l.t_ns);
      if (launch_node[i] == SIZE_MAX && !inside_any(evaluation, l.t_ns, l.t_ns))
        points[l.thread_index].push_back({l.t_ns, 1, static_cast<uint32_t>(i), true});
    }
  }
  const std::vector<Span> fetches = fetch_spans(run);
  // (forward thread id, seq nr) → (op start, module open then)
  std::map<std::pair<uint64_t, int64_t>, std::pair<int64_t, uint32_t>> creator;
  for (auto& [thread, pts] : points) {
    std::stable_sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) {
      return a.t != b.t ? a.t < b.t : a.order < b.order;
    });
    std::vector<std::pair<uint32_t, int64_t>> stack;
    for (const Point& p : pts) {
      if (p.order == 2) {
        stack.emplace_back(p.ref, p.t);
        if (stack.size() >= 2) stats[stack[stack.size() - 2].first].leaf = false;
      } else if (p.order == 0) {
        auto it = std::find_if(stack.rbegin(), stack.rend(), [&](const auto& s) { return s.first == p.ref; });
        if (it == stack.rend()) continue;
        const size_t pos = static_cast<size_t>(stack.rend() - it) - 1;
        if (thread == run.main_thread && inside_any(fetches, stack[pos].second, p.t)) {
          // the loader's transforms: data work, not the model's layers
        } else if (inside_any(evaluation, stack[pos].second, p.t)) {
          stats[p.ref].eval_calls += 1;
          stats[p.ref].eval_forward_ns += p.t - stack[pos].second;
        } else {
          stats[p.ref].calls += 1;
          stats[p.ref].forward_ns += p.t - stack[pos].second;
        }
        stack.resize(pos);  // also closes scopes whose forward raised
      } else if (p.launch) {
        if (!stack.empty()) launch_module[p.ref] = stack.back().first;
      } else {
        const OpEvent& e = run.timeline[p.ref];
        const uint32_t module = stack.empty() ? kNoModule : stack.back().first;
        // Several ops can carry one sequence number (aten::linear peeks the
        // number aten::addmm then takes): the latest-starting one made the node.
        auto [it, inserted] = creator.try_emplace({e.forward_tid, e.seq_nr}, e.start_ns, module);
        if (!inserted && e.start_ns >= it->second.first) it->second = {e.start_ns, module};
      }
    }
  }

  // Backward nodes that run while torch.compile compiles (inductor traces
  // its patterns' forward and backward on small real tensors, seen: 130 ms
  // of ReluBackward0, AddmmBackward0, ... in a compiled MLP's first step,
  // their forward ops inside the compiled module's call) are compile work,
  // not a layer's backward: the module's forward span already holds them.
  const auto compiling = compile_spans(run);
  auto in_compilation = [&](const OpEvent& e) {
    auto it = std::upper_bound(compiling.begin(), compiling.end(), std::make_pair(e.start_ns, INT64_MAX));
    return it != compiling.begin() && std::prev(it)->second >= e.end_ns;
  };
  std::vector<int64_t> own_backward(nm, 0);
  for (const OpEvent& e : run.timeline) {
    if (e.kind != OpKind::kBackward) continue;
    const int64_t d = e.end_ns - e.start_ns;
    if (!compiling.empty() && in_compilation(e)) {
      out.backward_unattributed_ns += d;
      continue;
    }
    auto it = creator.find({e.forward_tid, e.seq_nr});
    if (it == creator.end() || it->second.second == kNoModule) {
      out.backward_unattributed_ns += d;
      continue;
    }
    own_backward[it->second.second] += d;
    out.backward_attributed_ns += d;
  }
  for (uint32_t i = 0; i < nm; ++i) {
    int guard = 0;
    for (int32_t m = static_cast<int32_t>(i); m >= 0 && guard++ < 256; m = run.modules[m].parent)
      stats[m].backward_ns += own_backward[i];
  }
  if (launches != nullptr) {
    for (auto& s : stats) s.gpu_forward_ns = s.gpu_backward_ns = 0;
    for (size_t i = 0; i < launches->size(); ++i) {
      const int64_t d = (*launches)[i].device_ns;
      uint32_t module = kNoModule;
      bool backward = false;
      if (launch_node[i] != SIZE_MAX) {
        const OpEvent& node = run.timeline[launch_node[i]];
        auto it = creator.find({node.forward_tid, node.seq_nr});
        backward = true;
        if (it != creator.end() && !(!compiling.empty() && in_compilation(node))) module = it->second.second;
      } else {
        module = launch_module[i];
      }
      if (module == kNoModule) {
        out.gpu_unattributed_ns += d;
        continue;
      }
      out.gpu_attributed_ns += d;
      int guard = 0;
      for (int32_t m = static_cast<int32_t>(module); m >= 0 && guard++ < 256; m = run.modules[m].parent) {
        (backward ? stats[m].gpu_backward_ns : stats[m].gpu_forward_ns) += d;
        ++stats[m].gpu_launches;
      }
    }
  }
  for (auto& s : stats) {
    // A compiled module's children ran inside its compiled region, unseen:
    // it is not a leaf (heavy_layer must not name it as one layer).
    if (s.compiled) s.leaf = false;
    if (s.calls > 0 || s.backward_ns > 0 || s.eval_calls > 0) out.layers.push_back(std::move(s));
  }
  std::sort(out.layers.begin(), out.layers.end(), [](const LayerStats& a, const LayerStats& b) {
    if (a.combined() != b.combined()) return a.combined() > b.combined();
    return a.name < b.name;
  });
  return out;
}

}  // namespace torchneck
