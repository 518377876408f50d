#include "analyze/flame.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>

namespace torchneck {

const char* flame_kind_name(FlameKind kind) {
  switch (kind) {
    case FlameKind::kRoot: return "root";
    case FlameKind::kThread: return "thread";
    case FlameKind::kPython: return "python";
    case FlameKind::kOperator: return "operator";
    case FlameKind::kBackward: return "backward";
    case FlameKind::kScope: return "scope";
    case FlameKind::kModule: return "module";
  }
  return "?";
}

namespace {

FlameKind flame_kind_of(OpKind k) {
  switch (k) {
    case OpKind::kBackward: return FlameKind::kBackward;
    case OpKind::kUserScope: return FlameKind::kScope;
    case OpKind::kOperator:
    case OpKind::kTorchScript: return FlameKind::kOperator;
  }
  return FlameKind::kOperator;
}

// The tree while it is built: flat nodes, found by (parent, kind, ref), where
// ref is a canonical index into Run::python (kPython), a string id (events)
// or a thread index (kThread). Indices stay valid as the tree grows.
class Arena {
 public:
  struct Node {
    uint32_t parent = 0;
    FlameKind kind = FlameKind::kRoot;
    uint32_t ref = 0;
    int64_t self_ns = 0;
    uint64_t self_samples = 0;
  };

  Arena() { nodes_.push_back(Node{}); }

  uint32_t child(uint32_t parent, FlameKind kind, uint32_t ref) {
    const uint64_t key = (static_cast<uint64_t>(parent) << 32) | ref;
    auto& slot = index_[Key{key, kind}];
    if (slot == 0) {
      slot = static_cast<uint32_t>(nodes_.size());
      Node n;
      n.parent = parent;
      n.kind = kind;
      n.ref = ref;
      nodes_.push_back(n);
    }
    return slot;
  }
  void add(uint32_t node, int64_t ns, uint64_t samples) {
    nodes_[node].self_ns += ns;
    nodes_[node].self_samples += samples;
  }
  const std::vector<Node>& nodes() const { return nodes_; }

 private:
  struct Key {
    uint64_t parent_ref;
    FlameKind kind;
    bool operator==(const Key& o) const { return parent_ref == o.parent_ref && kind == o.kind; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return static_cast<size_t>((k.parent_ref ^ (static_cast<uint64_t>(k.kind) << 61)) * 0x9e3779b97f4a7c15ULL);
    }
  };
  std::vector<Node> nodes_;
  std::unordered_map<Key, uint32_t, KeyHash> index_;
};

// Python functions with the same name, file and line are one frame.
std::vector<uint32_t> canonical_functions(const Run& run) {
  std::vector<uint32_t> canon(run.python.size());
  std::unordered_map<std::string, uint32_t> first;
  for (size_t i = 0; i < run.python.size(); ++i) {
    const auto& f = run.python[i];
    std::string key = f.function;
    key += '\0';
    key += f.file;
    key += '\0';
    key += std::to_string(f.line);
    canon[i] = first.emplace(std::move(key), static_cast<uint32_t>(i)).first->second;
  }
  return canon;
}

bool ends_with(const std::string& s, const char* tail) {
  const size_t n = std::char_traits<char>::length(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// torchneck's own launcher (python -m torchneck → cli → runner → exec or
// runpy) sits above the user's script on the main thread: not the user's.
bool is_launcher_frame(const PyFunctionStats& f) {
  return ends_with(f.file, "torchneck/runner.py") || ends_with(f.file, "torchneck/cli.py") ||
         ends_with(f.file, "torchneck/__main__.py") || f.file == "<frozen runpy>" || ends_with(f.file, "/runpy.py");
}

// A stretch of one thread's time: a timeline event, an nn.Module call or a
// traced Python call.
struct Span {
  int64_t start, end;
  FlameKind kind;
  uint32_t ref;
};

// Outer first: earlier start, then longer, then (same span) a Python call
// before the module it entered, before the operator it ran.
bool outer_first(const Span& a, const Span& b) {
  if (a.start != b.start) return a.start < b.start;
  if (a.end != b.end) return a.end > b.end;
  auto rank = [](FlameKind k) { return k == FlameKind::kPython ? 0 : k == FlameKind::kModule ? 1 : 2; };
  return rank(a.kind) < rank(b.kind);
}

struct Builder {
  explicit Builder(const Run& r) : run(r) {}
  const Run& run;
  Arena arena;
  std::vector<uint32_t> canon;
  std::vector<char> launcher;  // per Run::python index
  bool per_thread = false;
  std::vector<std::vector<Span>> spans_of_thread;  // events and module calls, outer_first order
  // Detail windows (Run::detail_spans when Run::detail_mode is "window"),
  // else null; the samples outside them by stack (time, count), and the
  // nodes each stack's samples inside them reached (node, time).
  const std::vector<std::pair<int64_t, int64_t>>* detail = nullptr;
  std::map<uint32_t, std::pair<int64_t, uint64_t>> undetailed;
  std::unordered_map<uint32_t, std::vector<std::pair<uint32_t, int64_t>>> joined;

  uint32_t thread_root(uint32_t thread) {
    return per_thread ? arena.child(0, FlameKind::kThread, thread) : 0;
  }
  // The stack's frames below the launcher's (all of them when the stack is
  // the launcher's alone).
  uint32_t python_path(uint32_t at, const SampledStack& st) {
    size_t first = 0;
    while (first < st.frames.size() && st.frames[first] < launcher.size() && launcher[st.frames[first]]) ++first;
    if (first == st.frames.size()) first = 0;
    for (size_t i = first; i < st.frames.size(); ++i)
      if (st.frames[i] < canon.size()) at = arena.child(at, FlameKind::kPython, canon[st.frames[i]]);
    return at;
  }

  // Samples of one thread, in time order, joined with the events open at
  // each sample's time.
  void add_sampled_thread(uint32_t thread, const std::vector<uint32_t>& samples, std::vector<int64_t>& window_ns,
                          std::vector<uint64_t>& window_samples, std::vector<uint32_t>& leaf_of_stack) {
    const uint32_t top = thread_root(thread);
    const auto& spans = spans_of_thread[thread];
    size_t next = 0, next_detail = 0;
    std::vector<const Span*> open;  // outermost first
    for (uint32_t si : samples) {
      const PySample& x = run.samples[si];
      if (x.stack == PySample::kNoStack || x.stack >= run.stacks.size()) continue;
      const SampledStack& st = run.stacks[x.stack];
      if (st.thread_index != thread) continue;
      while (next < spans.size() && spans[next].start <= x.t_ns) open.push_back(&spans[next++]);
      open.erase(std::remove_if(open.begin(), open.end(), [&](const Span* e) { return e->end <= x.t_ns; }),
                 open.end());
      window_ns[x.stack] += x.weight_ns;
      ++window_samples[x.stack];
      if (detail != nullptr) {  // samples by time: the first window not yet ended
        while (next_detail < detail->size() && (*detail)[next_detail].second <= x.t_ns) ++next_detail;
        if (next_detail == detail->size() || (*detail)[next_detail].first > x.t_ns) {
          undetailed[x.stack].first += x.weight_ns;
          ++undetailed[x.stack].second;
          continue;
        }
      }
      if (leaf_of_stack[x.stack] == 0) leaf_of_stack[x.stack] = python_path(top, st);
      uint32_t at = leaf_of_stack[x.stack];
      for (const Span* e : open) at = arena.child(at, e->kind, e->ref);
      arena.add(at, x.weight_ns, 1);
      if (detail != nullptr) joined[x.stack].push_back({at, x.weight_ns});
    }
  }

  // Detail windows: a stack's samples outside them (no operators, modules or
  // backward nodes were recorded there) go where its samples inside them
  // went, in the same proportions of time; a stack never sampled inside a
  // window keeps its Python path alone.
  void spread_undetailed(std::vector<uint32_t>& leaf_of_stack) {
    for (auto& [stack, rest] : undetailed) {
      auto it = joined.find(stack);
      if (it == joined.end() || it->second.empty()) {
        if (leaf_of_stack[stack] == 0)
          leaf_of_stack[stack] = python_path(thread_root(run.stacks[stack].thread_index), run.stacks[stack]);
        arena.add(leaf_of_stack[stack], rest.first, rest.second);
        continue;
      }
      std::map<uint32_t, int64_t> by_node;
      int64_t total = 0;
      for (const auto& [node, ns] : it->second) {
        by_node[node] += ns;
        total += ns;
      }
      // Time in proportion; samples too, the remainders to the largest parts.
      std::vector<std::pair<double, uint32_t>> remainders;
      int64_t ns_left = rest.first;
      uint64_t samples_left = rest.second;
      for (const auto& [node, ns] : by_node) {
        const double part = total > 0 ? static_cast<double>(ns) / static_cast<double>(total) : 0;
        const auto ns_here = static_cast<int64_t>(part * static_cast<double>(rest.first));
        const double exact = part * static_cast<double>(rest.second);
        const auto samples_here = static_cast<uint64_t>(exact);
        arena.add(node, ns_here, samples_here);
        ns_left -= ns_here;
        samples_left -= samples_here;
        remainders.push_back({exact - static_cast<double>(samples_here), node});
      }
      std::stable_sort(remainders.begin(), remainders.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      arena.add(remainders.front().second, ns_left, 0);
      for (size_t i = 0; samples_left > 0 && i < remainders.size(); ++i, --samples_left)
        arena.add(remainders[i].second, 0, 1);
    }
  }

  // A thread without samples: the nesting of its events, time-weighted.
  void add_event_thread(uint32_t thread, const std::vector<const PyFrameEvent*>& calls) {
    using Interval = Span;
    std::vector<Interval> ivs;
    for (const PyFrameEvent* f : calls)
      if (f->function < canon.size() && !launcher[f->function] && f->end_ns > f->start_ns)
        ivs.push_back({f->start_ns, f->end_ns, FlameKind::kPython, canon[f->function]});
    for (const Span& sp : spans_of_thread[thread])
      if (sp.end > sp.start) ivs.push_back(sp);
    if (ivs.empty()) return;
    std::stable_sort(ivs.begin(), ivs.end(), outer_first);
    const uint32_t top = thread_root(thread);
    struct Open {
      const Interval* iv;
      uint32_t node;
    };
    std::vector<Open> open;
    int64_t cursor = ivs.front().start;
    // Moves time forward to t, giving each stretch to the innermost open path.
    auto advance = [&](int64_t t) {
      while (!open.empty()) {
        int64_t first_end = std::numeric_limits<int64_t>::max();
        for (const Open& o : open) first_end = std::min(first_end, o.iv->end);
        if (first_end > t) break;
        arena.add(open.back().node, first_end - cursor, 0);
        cursor = first_end;
        // Events that do not nest (one ends inside another that started
        // later) leave from the middle: re-derive the paths above them.
        size_t keep = 0;
        size_t first_removed = open.size();
        for (size_t i = 0; i < open.size(); ++i) {
          if (open[i].iv->end <= first_end) {
            first_removed = std::min(first_removed, keep);
            continue;
          }
          open[keep++] = open[i];
        }
        open.resize(keep);
        for (size_t i = first_removed; i < open.size(); ++i)
          open[i].node = arena.child(i == 0 ? top : open[i - 1].node, open[i].iv->kind, open[i].iv->ref);
      }
      if (!open.empty()) arena.add(open.back().node, t - cursor, 0);
      cursor = t;
    };
    for (const Interval& iv : ivs) {
      advance(iv.start);
      open.push_back(Open{&iv, arena.child(open.empty() ? top : open.back().node, iv.kind, iv.ref)});
    }
    advance(std::numeric_limits<int64_t>::max());
  }

  std::string name_of(const Arena::Node& n, std::string& file, int& line) const {
    switch (n.kind) {
      case FlameKind::kRoot: return "all";
      case FlameKind::kThread: {
        const ThreadInfo ti = n.ref < run.threads.size() ? run.threads[n.ref] : ThreadInfo{};
        return ti.name.empty() ? "thread " + std::to_string(ti.os_tid) : ti.name;
      }
      case FlameKind::kPython: {
        const auto& f = run.python[n.ref];
        file = f.file;
        line = f.line;
        return f.function;
      }
      case FlameKind::kModule: {
        const auto& m = run.modules[n.ref];
        return m.name.empty() || m.name == m.type ? m.type : m.name + " (" + m.type + ")";
      }
      default: return run.strings[n.ref];
    }
  }

  FlameNode tree() const {
    const auto& nodes = arena.nodes();
    std::vector<int64_t> total(nodes.size());
    std::vector<uint64_t> samples(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      total[i] = nodes[i].self_ns;
      samples[i] = nodes[i].self_samples;
    }
    for (size_t i = nodes.size(); i-- > 1;) {  // children come after their parents
      total[nodes[i].parent] += total[i];
      samples[nodes[i].parent] += samples[i];
    }
    std::vector<std::vector<uint32_t>> kids(nodes.size());
    for (size_t i = 1; i < nodes.size(); ++i)
      if (total[i] > 0 || samples[i] > 0) kids[nodes[i].parent].push_back(static_cast<uint32_t>(i));
    std::vector<FlameNode> built(nodes.size());
    for (size_t i = nodes.size(); i-- > 0;) {  // children first
      FlameNode& n = built[i];
      n.kind = nodes[i].kind;
      n.name = name_of(nodes[i], n.file, n.line);
      n.self_ns = nodes[i].self_ns;
      n.total_ns = total[i];
      n.samples = samples[i];
      n.children.reserve(kids[i].size());
      for (uint32_t k : kids[i]) n.children.push_back(std::move(built[k]));
      std::sort(n.children.begin(), n.children.end(), [](const FlameNode& a, const FlameNode& b) {
        if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
        if (a.name != b.name) return a.name < b.name;
        return a.file < b.file;
      });
    }
    return std::move(built[0]);
  }
};

}  // namespace

FlameNode build_flame(const Run& run) {
  Builder b(run);
  b.canon = canonical_functions(run);
  b.launcher.resize(run.python.size());
  for (size_t i = 0; i < run.python.size(); ++i) b.launcher[i] = is_launcher_frame(run.python[i]) ? 1 : 0;
  if (run.detail_mode == "window") b.detail = &run.detail_spans;

  // Which threads contribute, and how. A hand-built Run may name threads it
  // does not list; a bogus index cannot make this allocate without bound.
  size_t nthreads = run.threads.size();
  const size_t max_threads = run.threads.size() + 4096;
  auto see = [&](uint32_t t) {
    if (t < max_threads) nthreads = std::max<size_t>(nthreads, size_t{t} + 1);
  };
  for (const auto& st : run.stacks) see(st.thread_index);
  for (const auto& ev : run.timeline) see(ev.thread_index);
  for (const auto& f : run.py_frames) see(f.thread_index);
  for (const auto& m : run.module_events) see(m.thread_index);
  std::vector<char> sampled(nthreads, 0), evented(nthreads, 0);
  for (const auto& st : run.stacks)
    if (st.thread_index < nthreads) sampled[st.thread_index] = 1;
  b.spans_of_thread.resize(nthreads);
  for (const OpEvent& ev : run.timeline) {
    if (ev.thread_index >= nthreads || ev.name_id >= run.strings.size()) continue;
    b.spans_of_thread[ev.thread_index].push_back({ev.start_ns, ev.end_ns, flame_kind_of(ev.kind), ev.name_id});
    evented[ev.thread_index] = 1;
  }
  {  // nn.Module calls: enter and exit paired per thread (calls left open are left out)
    std::vector<std::vector<const ModuleEvent*>> entered(nthreads);
    for (const ModuleEvent& m : run.module_events) {
      if (m.thread_index >= nthreads || m.module >= run.modules.size()) continue;
      auto& stack = entered[m.thread_index];
      if (!m.is_exit) {
        stack.push_back(&m);
        continue;
      }
      // the matching enter: the innermost open call of this module
      for (size_t i = stack.size(); i-- > 0;) {
        if (stack[i]->module != m.module) continue;
        b.spans_of_thread[m.thread_index].push_back({stack[i]->t_ns, m.t_ns, FlameKind::kModule, m.module});
        evented[m.thread_index] = 1;
        stack.resize(i);
        break;
      }
    }
  }
  std::vector<std::vector<const PyFrameEvent*>> calls_of_thread(nthreads);
  for (const auto& f : run.py_frames)
    if (f.thread_index < nthreads) {
      calls_of_thread[f.thread_index].push_back(&f);
      evented[f.thread_index] = 1;
    }
  size_t contributing = 0;
  for (size_t t = 0; t < nthreads; ++t) contributing += (sampled[t] || evented[t]) ? 1 : 0;
  b.per_thread = contributing > 1;
  for (auto& spans : b.spans_of_thread) std::stable_sort(spans.begin(), spans.end(), outer_first);

  // Sampled threads: the window's samples joined with events, then the rest
  // of each stack's weight as Python frames alone.
  std::vector<std::vector<uint32_t>> samples_of_thread(nthreads);
  for (size_t i = 0; i < run.samples.size(); ++i) {
    const PySample& x = run.samples[i];
    if (x.thread_index < nthreads && sampled[x.thread_index])
      samples_of_thread[x.thread_index].push_back(static_cast<uint32_t>(i));
  }
  std::vector<int64_t> window_ns(run.stacks.size(), 0);
  std::vector<uint64_t> window_samples(run.stacks.size(), 0);
  std::vector<uint32_t> leaf_of_stack(run.stacks.size(), 0);  // 0: not resolved yet
  for (uint32_t t = 0; t < nthreads; ++t) {
    if (!sampled[t]) continue;
    auto& mine = samples_of_thread[t];
    std::stable_sort(mine.begin(), mine.end(),
                     [&](uint32_t x, uint32_t y) { return run.samples[x].t_ns < run.samples[y].t_ns; });
    b.add_sampled_thread(t, mine, window_ns, window_samples, leaf_of_stack);
  }
  b.spread_undetailed(leaf_of_stack);
  for (size_t i = 0; i < run.stacks.size(); ++i) {
    const SampledStack& st = run.stacks[i];
    if (st.thread_index >= nthreads) continue;
    const int64_t rest_ns = std::max<int64_t>(0, st.weight_ns - window_ns[i]);
    const uint64_t rest_samples = st.samples > window_samples[i] ? st.samples - window_samples[i] : 0;
    if (rest_ns == 0 && rest_samples == 0) continue;
    if (leaf_of_stack[i] == 0) leaf_of_stack[i] = b.python_path(b.thread_root(st.thread_index), st);
    b.arena.add(leaf_of_stack[i], rest_ns, rest_samples);
  }

  // Threads without samples: their events' nesting.
  for (uint32_t t = 0; t < nthreads; ++t)
    if (!sampled[t] && evented[t]) b.add_event_thread(t, calls_of_thread[t]);
  return b.tree();
}

}  // namespace torchneck
