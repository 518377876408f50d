#include "analyze/steps.h"

#include <algorithm>
#include <utility>

#include "analyze/compiled.h"
#include "analyze/timeline_view.h"

namespace torchneck {
namespace {

// Warm-up: the first step always (it carries lazy initialisation), and any
// of the first quarter (at most 5) slower than kWarmupFactor x the median.
// Outliers anywhere: slower than kOutlierFactor x the median (a checkpoint
// save, an evaluation pass). Both are excluded from the steady state.
constexpr double kWarmupFactor = 1.5;
constexpr double kOutlierFactor = 3.0;

using Span = std::pair<int64_t, int64_t>;

int64_t median_of(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Maximal runs of backward work on the main thread: a pass ends when an
// event that is not backward work starts after everything of the pass ended.
std::vector<Span> backward_passes(const TimelineView& tv) {
  std::vector<Span> passes;
  bool open = false;
  for (size_t i : tv.main_events) {
    const OpEvent& e = tv.run.timeline[i];
    if (tv.is_backward(e)) {
      if (!open) passes.emplace_back(e.start_ns, e.end_ns);
      open = true;
      passes.back().second = std::max(passes.back().second, e.end_ns);
    } else if (open && e.start_ns >= passes.back().second) {
      open = false;
    }
  }
  return passes;
}

// Top-level nn.Module forward spans on the main thread.
std::vector<Span> module_spans(const Run& run) {
  std::vector<Span> spans;
  std::vector<std::pair<uint32_t, int64_t>> stack;  // module, enter time
  for (const ModuleEvent& e : run.module_events) {
    if (e.thread_index != run.main_thread) continue;
    if (!e.is_exit) {
      stack.emplace_back(e.module, e.t_ns);
      continue;
    }
    // Pop to the matching enter: a forward that raised left its enter open.
    auto it = std::find_if(stack.rbegin(), stack.rend(), [&](const auto& s) { return s.first == e.module; });
    if (it == stack.rend()) continue;
    const size_t depth = static_cast<size_t>(stack.rend() - it) - 1;
    if (depth == 0) spans.emplace_back(stack[0].second, e.t_ns);
    stack.resize(depth);
  }
  return spans;
}

std::vector<Span> detect_steps(const TimelineView& tv, const std::vector<Span>& passes,
                               const std::vector<Span>& forward, std::string* source) {
  const Run& run = tv.run;
  std::vector<Span> profiler, opt_steps, nexts;
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (size_t i : tv.main_events) {
    const OpEvent& e = run.timeline[i];
    first = std::min(first, e.start_ns);
    last = std::max(last, e.end_ns);
    if (tv.is_profiler_step(e)) profiler.emplace_back(e.start_ns, e.end_ns);
    else if (tv.is_optimizer_step(e)) opt_steps.emplace_back(e.start_ns, e.end_ns);
    else if (tv.is_data(e)) nexts.emplace_back(e.start_ns, e.end_ns);
  }
  if (!forward.empty()) {
    first = std::min(first, forward.front().first);
    last = std::max(last, forward.back().second);
  }
  // Where iteration 0 begins: its first data fetch, else its first forward.
  int64_t begin = first;
  if (!nexts.empty()) begin = nexts.front().first;
  else if (!forward.empty()) begin = forward.front().first;

  std::vector<Span> steps;
  if (!profiler.empty()) {
    *source = "profiler_step";
    return profiler;
  }
  if (!opt_steps.empty()) {
    // Every optimizer steps once per iteration (a GAN's two count as one);
    // if the counts do not divide evenly, each step call is an iteration.
    size_t k = std::max<size_t>(1, run.env.optimizers.size());
    if (opt_steps.size() % k != 0) k = 1;
    *source = "optimizer";
    int64_t b = std::min(begin, opt_steps.front().first);
    for (size_t i = k - 1; i < opt_steps.size(); i += k) {
      steps.emplace_back(b, opt_steps[i].second);
      b = opt_steps[i].second;
    }
    return steps;
  }
  if (!nexts.empty() && (!passes.empty() || !forward.empty())) {
    *source = "dataloader";
    for (size_t i = 0; i < nexts.size(); ++i) {
      const int64_t end = i + 1 < nexts.size() ? nexts[i + 1].first : last;
      // The final fetch that only raised StopIteration has no work after it.
      const bool has_work =
          std::any_of(passes.begin(), passes.end(), [&](const Span& p) { return p.first >= nexts[i].second && p.first < end; }) ||
          std::any_of(forward.begin(), forward.end(), [&](const Span& f) { return f.first >= nexts[i].second && f.first < end; });
      if (has_work) steps.emplace_back(nexts[i].first, end);
    }
    if (!steps.empty()) return steps;
  }
  if (!passes.empty()) {
    *source = "backward";
    int64_t b = std::min(begin, passes.front().first);
    for (const Span& p : passes) {
      steps.emplace_back(b, p.second);
      b = p.second;
    }
    return steps;
  }
  *source = "whole_run";
  if (first <= last) steps.emplace_back(first, last);
  return steps;
}

// A step in which torch.compile compiled (its first call, a recompilation)
// is not steady, however short the compilation: it ran other code (with
// fewer than three steps, as for warm-up, every step is kept).
void mark_steady(StepAnalysis& a, const std::vector<Span>& compiling) {
  const size_t n = a.steps.size();
  if (n < 3) return;
  for (Step& st : a.steps)
    for (const Span& c : compiling)
      if (c.first < st.end_ns && c.second > st.start_ns) st.steady = false;
  std::vector<int64_t> rest;
  for (size_t i = 1; i < n; ++i) rest.push_back(a.steps[i].duration());
  const auto m = static_cast<double>(median_of(rest));
  a.steps[0].steady = false;
  const size_t warmup_window = std::min<size_t>(5, n / 4 + 1);
  for (size_t i = 1; i < n; ++i) {
    const auto d = static_cast<double>(a.steps[i].duration());
    if ((i < warmup_window && d > kWarmupFactor * m) || d > kOutlierFactor * m) a.steps[i].steady = false;
  }
}

}  // namespace

const char* phase_name(Phase p) {
  static const char* names[] = {"data", "optimizer", "backward", "forward", "other"};
  return names[static_cast<int>(p)];
}

int64_t StepBreakdown::total() const {
  int64_t t = 0;
  for (int64_t v : ns) t += v;
  return t;
}

namespace {

// One sweep over all interval boundaries and step boundaries: each
// elementary segment goes to the step containing it, under the
// highest-priority phase active there.
void sweep(const std::vector<PhaseInterval>& intervals, std::vector<Step>& steps,
           std::vector<PhaseSegment>* segments = nullptr) {
  if (steps.empty()) return;
  struct Edge {
    int64_t t;
    int delta;
    int phase;
  };
  std::vector<Edge> edges;
  std::vector<int64_t> points;
  for (const auto& iv : intervals) {
    if (iv.end_ns <= iv.start_ns) continue;
    edges.push_back({iv.start_ns, +1, static_cast<int>(iv.phase)});
    edges.push_back({iv.end_ns, -1, static_cast<int>(iv.phase)});
    points.push_back(iv.start_ns);
    points.push_back(iv.end_ns);
  }
  for (const Step& s : steps) {
    points.push_back(s.start_ns);
    points.push_back(s.end_ns);
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  int active[kNumPhases] = {0, 0, 0, 0, 0};
  size_t ei = 0, sj = 0;
  for (size_t k = 0; k + 1 < points.size(); ++k) {
    const int64_t t = points[k];
    while (ei < edges.size() && edges[ei].t <= t) {
      active[edges[ei].phase] += edges[ei].delta;
      ++ei;
    }
    while (sj < steps.size() && steps[sj].end_ns <= t) ++sj;
    if (sj >= steps.size()) break;
    if (t < steps[sj].start_ns) continue;
    int phase = static_cast<int>(Phase::kOther);
    for (int p = 0; p < static_cast<int>(Phase::kOther); ++p)
      if (active[p] > 0) {
        phase = p;
        break;
      }
    steps[sj].breakdown.ns[phase] += points[k + 1] - t;
    if (segments != nullptr && phase != static_cast<int>(Phase::kOther)) {
      auto& seg = *segments;
      if (!seg.empty() && seg.back().step == sj && seg.back().end_ns == t &&
          static_cast<int>(seg.back().phase) == phase)
        seg.back().end_ns = points[k + 1];
      else
        seg.push_back({sj, t, points[k + 1], static_cast<Phase>(phase)});
    }
  }
}

// The labelled intervals the breakdown is swept from.
std::vector<PhaseInterval> phase_intervals(const TimelineView& tv, const std::vector<Span>& passes,
                                           const std::vector<Span>& forward) {
  const Run& run = tv.run;
  std::vector<PhaseInterval> intervals;
  for (const Span& p : passes) intervals.push_back({p.first, p.second, Phase::kBackward});
  for (const Span& f : forward) intervals.push_back({f.first, f.second, Phase::kForward});
  for (size_t i : tv.main_events) {
    const OpEvent& e = run.timeline[i];
    if (tv.is_data(e)) intervals.push_back({e.start_ns, e.end_ns, Phase::kData});
    else if (tv.is_optimizer(e)) intervals.push_back({e.start_ns, e.end_ns, Phase::kOptimizer});
    else if (e.kind == OpKind::kOperator) intervals.push_back({e.start_ns, e.end_ns, Phase::kForward});
  }
  return intervals;
}

}  // namespace

StepBreakdown attribute_phases(const std::vector<PhaseInterval>& intervals, int64_t start_ns,
                               int64_t end_ns) {
  std::vector<Step> one(1);
  one[0].start_ns = start_ns;
  one[0].end_ns = end_ns;
  sweep(intervals, one);
  return one[0].breakdown;
}

std::vector<PhaseSegment> phase_segments(const Run& run, const StepAnalysis& analysis) {
  const TimelineView tv(run);
  std::vector<Step> steps = analysis.steps;
  for (Step& s : steps) s.breakdown = StepBreakdown{};
  std::vector<PhaseSegment> segments;
  sweep(phase_intervals(tv, backward_passes(tv), module_spans(run)), steps, &segments);
  return segments;
}

StepAnalysis analyze_steps(const Run& run) {
  StepAnalysis a;
  a.timeline_truncated = run.dropped_events > 0;
  const TimelineView tv(run);
  const std::vector<Span> passes = backward_passes(tv);
  const std::vector<Span> forward = module_spans(run);
  for (const Span& s : detect_steps(tv, passes, forward, &a.source)) {
    Step st;
    st.start_ns = s.first;
    st.end_ns = s.second;
    a.steps.push_back(st);
  }
  sweep(phase_intervals(tv, passes, forward), a.steps);
  // Operators per step (all nesting levels) and their self time.
  size_t sj = 0;
  for (size_t i : tv.main_events) {
    const OpEvent& e = run.timeline[i];
    if (e.kind != OpKind::kOperator) continue;
    while (sj < a.steps.size() && a.steps[sj].end_ns <= e.start_ns) ++sj;
    if (sj >= a.steps.size()) break;
    if (e.start_ns < a.steps[sj].start_ns) continue;
    ++a.steps[sj].ops;
    a.steps[sj].op_self_ns += tv.self_ns[i];
  }
  mark_steady(a, compile_spans(run));
  a.count = a.steps.size();
  if (a.timeline_truncated && (a.source == "optimizer" || a.source == "dataloader")) {
    uint64_t calls = 0;
    const char* prefix = a.source == "optimizer" ? "Optimizer.step#" : "enumerate(DataLoader)";
    for (const OpStats& op : run.ops)
      if (op.kind == OpKind::kUserScope && op.name.rfind(prefix, 0) == 0) calls += op.calls;
    size_t k = 1;
    if (a.source == "optimizer") {
      k = std::max<size_t>(1, run.env.optimizers.size());
      if (calls % k != 0) k = 1;
    } else {
      // Each epoch's last fetch only raises StopIteration.
      k = 1;
      calls -= std::min<uint64_t>(calls, run.env.dataloaders.empty() ? 0 : 1);
    }
    a.count = std::max<size_t>(a.count, static_cast<size_t>(calls / k));
  }
  std::vector<int64_t> steady;
  StepBreakdown sum;
  int64_t sum_total = 0;
  double ops = 0, op_self = 0;
  for (const Step& s : a.steps) {
    if (!s.steady) {
      ++a.excluded;
      continue;
    }
    steady.push_back(s.duration());
    for (int p = 0; p < kNumPhases; ++p) sum.ns[p] += s.breakdown.ns[p];
    sum_total += s.duration();
    ops += static_cast<double>(s.ops);
    op_self += static_cast<double>(s.op_self_ns);
  }
  a.median_ns = median_of(steady);
  if (sum_total > 0) {
    int64_t assigned = 0;
    for (int p = 0; p < kNumPhases - 1; ++p) {
      a.median.ns[p] = static_cast<int64_t>(static_cast<double>(sum.ns[p]) * a.median_ns / sum_total);
      assigned += a.median.ns[p];
    }
    a.median.ns[kNumPhases - 1] = a.median_ns - assigned;  // exact sum despite rounding
  }
  if (!steady.empty()) {
    a.ops_per_step = ops / static_cast<double>(steady.size());
    a.op_self_ns_per_step = op_self / static_cast<double>(steady.size());
  }
  return a;
}

}  // namespace torchneck
