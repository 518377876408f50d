#include "analyze/steps.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "analyze/compiled.h"
#include "analyze/detail_cost.h"
#include "analyze/light_steps.h"
#include "analyze/loop_spans.h"
#include "analyze/optimizer_iterations.h"
#include "analyze/slow_steps.h"
#include "analyze/timeline_view.h"
#include "analyze/top_level_ops.h"
#include "core/stats.h"

namespace torchneck {
namespace {

// Warm-up: the first step always (it carries lazy initialisation), and the
// steps right after it, within the first quarter (at most 5), while each is
// slower than kWarmupFactor x the median: a start that settles. A slow step
// after a fast one is no warm-up (a loader with 2 workers makes every other
// step slow from the start): it stays in the statistics and is explained
// (slow_steps.h). Nothing else is left out.
constexpr double kWarmupFactor = 1.5;

// Optimizer steps per iteration in the timeline (`iterations` of them):
// their ratio where it is whole; with no optimizer step in the timeline
// (LBFGS's window filled inside the first), the optimizers created.
size_t optimizer_steps_per_iteration(const TimelineView& tv, size_t iterations) {
  size_t calls = 0;
  for (size_t i : tv.main_events) calls += tv.is_optimizer_step(tv.run.timeline[i]) ? 1 : 0;
  if (calls == 0) return std::max<size_t>(1, tv.run.env.optimizers.size());
  return iterations > 0 && calls % iterations == 0 ? calls / iterations : 1;
}

std::vector<Span> detect_steps(const TimelineView& tv, const std::vector<Span>& passes,
                               const std::vector<Span>& forward, const std::vector<uint32_t>& roots,
                               const std::vector<Span>& evaluation, std::string* source) {
  const Run& run = tv.run;
  std::vector<Span> profiler, opt_steps, nexts;
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (size_t i : tv.main_events) {
    const OpEvent& e = run.timeline[i];
    first = std::min(first, e.start_ns);
    last = std::max(last, e.end_ns);
    if (tv.is_profiler_step(e)) profiler.emplace_back(e.start_ns, e.end_ns);
    else if (tv.is_optimizer_step(e)) opt_steps.emplace_back(e.start_ns, e.end_ns);
    // A validation loader's fetches belong to their evaluation pass.
    else if (tv.is_data(e) && !inside_any(evaluation, e.start_ns, e.end_ns)) nexts.emplace_back(e.start_ns, e.end_ns);
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
    *source = "optimizer";
    const OptimizerLoop loop{opt_steps, passes, nexts, forward, roots, std::min(begin, opt_steps.front().first),
                             run.env.optimizers.size()};
    return optimizer_iterations(loop);
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
// fewer than three steps, as for warm-up, every step is kept). So is a step
// of the GPU window (`other`): Kineto's callbacks ran beside ours, and
// stopping it cost the step that stopped it.
void mark_steady(StepAnalysis& a, const std::vector<Span>& compiling, const Span* window) {
  const size_t n = a.steps.size();
  if (n < 3) return;
  if (window != nullptr)
    for (Step& st : a.steps) {
      // The window opens and closes inside optimizer.step (its post-hooks),
      // before the boundary: its steps are those that start inside it. The
      // step it opens in ends inside it too, by however long the thread
      // waited for a CPU there: no share of its time tells it apart.
      if (st.start_ns >= window->first && st.start_ns < window->second) st.steady = false, st.gpu_window = true;
    }
  for (Step& st : a.steps)
    for (const Span& c : compiling)
      if (c.first < st.end_ns && c.second > st.start_ns) st.steady = false;
  std::vector<int64_t> rest;
  for (size_t i = 1; i < n; ++i) rest.push_back(a.steps[i].duration());
  const auto m = static_cast<double>(median(rest));
  a.steps[0].steady = false;
  const size_t warmup_window = std::min<size_t>(5, n / 4 + 1);
  for (size_t i = 1; i < warmup_window && static_cast<double>(a.steps[i].duration()) > kWarmupFactor * m; ++i)
    a.steps[i].steady = false;
}

}  // namespace

const char* phase_name(Phase p) {
  static const char* names[] = {"data", "optimizer", "backward", "forward", "evaluation", "other"};
  return names[static_cast<int>(p)];
}

const char* slow_kind_name(SlowKind k) {
  static const char* names[] = {"", "periodic", "evaluation", "one-off"};
  return names[static_cast<int>(k)];
}

int64_t StepBreakdown::total() const {
  int64_t t = 0;
  for (int64_t v : ns) t += v;
  return t;
}

namespace {

// The priority of the intervals, highest first: evaluation holds
// everything inside its pass (its fetches, its forward); module calls
// inside optimizer.step (LBFGS's closure) are forward and backward, while
// the optimizer's own operators, outside any module call, are its own.
constexpr int kTiers = 6;
constexpr Phase kTierPhase[kTiers] = {Phase::kEvaluation, Phase::kData,      Phase::kBackward,
                                      Phase::kForward,    Phase::kOptimizer, Phase::kForward};
int tier_of(const PhaseInterval& iv) {
  switch (iv.phase) {
    case Phase::kEvaluation: return 0;
    case Phase::kData: return 1;
    case Phase::kBackward: return 2;
    case Phase::kForward: return iv.loose ? 5 : 3;
    case Phase::kOptimizer: return 4;
    case Phase::kOther: break;
  }
  return -1;
}

// One sweep over all interval boundaries and step boundaries: each
// elementary segment goes to the step containing it, under the
// highest-priority phase active there.
//
// `joint` (one per step): each instant's time by (the phase the light
// intervals alone give it, the phase all intervals give it), row-major
// [light * kNumPhases + full]: what a step outside the detail windows, which
// has only the light intervals, would have been had it been detailed.
// The launcher's own work in "other" (Step::tool_ns) is left out of it.
struct JointSweep {
  std::vector<JointPhases> time;
};
void sweep(const std::vector<PhaseInterval>& intervals, std::vector<Step>& steps,
           std::vector<PhaseSegment>* segments = nullptr, JointSweep* joint = nullptr) {
  if (steps.empty()) return;
  // 16 bytes an edge, and no separate list of points: the distinct instants
  // are merged on the fly from the sorted edges and the steps' bounds. Over
  // a whole run's operators (tiny_ops: ~2x10^5 intervals, at the end of the
  // run) the edges and a points list grown by doubling were ~20 MB.
  struct Edge {
    int64_t t;
    int8_t delta;
    int8_t tier;
    bool light;
    bool light_only;
    bool tool;
  };
  if (joint != nullptr) {
    joint->time.assign(steps.size(), JointPhases{});
  }
  size_t n_edges = 0;
  for (const auto& iv : intervals)
    if (iv.end_ns > iv.start_ns && (tier_of(iv) >= 0 || iv.tool) && (!iv.light_only || joint != nullptr)) n_edges += 2;
  std::vector<Edge> edges;
  edges.reserve(n_edges);
  for (const auto& iv : intervals) {
    const int tier = tier_of(iv);
    if (iv.end_ns <= iv.start_ns || (tier < 0 && !iv.tool)) continue;
    if (iv.light_only && joint == nullptr) continue;
    const bool light = iv.light || iv.light_only;
    edges.push_back({iv.start_ns, +1, static_cast<int8_t>(tier), light, iv.light_only, iv.tool});
    edges.push_back({iv.end_ns, -1, static_cast<int8_t>(tier), light, iv.light_only, iv.tool});
  }
  std::vector<int64_t> bounds;
  bounds.reserve(2 * steps.size());
  for (const Step& s : steps) {
    bounds.push_back(s.start_ns);
    bounds.push_back(s.end_ns);
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
  std::sort(bounds.begin(), bounds.end());
  // The smallest instant after `t` among the edges and the bounds.
  size_t pe = 0, pb = 0;
  auto next_point = [&](int64_t t, int64_t& out) {
    while (pe < edges.size() && edges[pe].t <= t) ++pe;
    while (pb < bounds.size() && bounds[pb] <= t) ++pb;
    if (pe == edges.size() && pb == bounds.size()) return false;
    out = pe == edges.size() ? bounds[pb] : pb == bounds.size() ? edges[pe].t : std::min(edges[pe].t, bounds[pb]);
    return true;
  };
  int active[kTiers] = {0, 0, 0, 0, 0, 0};
  int active_light[kTiers] = {0, 0, 0, 0, 0, 0};
  int active_tool = 0;
  size_t ei = 0, sj = 0;
  int64_t t = edges.empty() ? bounds.front() : std::min(edges.front().t, bounds.front());
  for (int64_t t_next = 0; next_point(t, t_next); t = t_next) {
    while (ei < edges.size() && edges[ei].t <= t) {
      if (edges[ei].tool) {
        active_tool += edges[ei].delta;
        ++ei;
        continue;
      }
      if (!edges[ei].light_only) active[edges[ei].tier] += edges[ei].delta;
      if (edges[ei].light) active_light[edges[ei].tier] += edges[ei].delta;
      ++ei;
    }
    while (sj < steps.size() && steps[sj].end_ns <= t) ++sj;
    if (sj >= steps.size()) break;
    if (t < steps[sj].start_ns) continue;
    int phase = static_cast<int>(Phase::kOther);
    for (int tier = 0; tier < kTiers; ++tier)
      if (active[tier] > 0) {
        phase = static_cast<int>(kTierPhase[tier]);
        break;
      }
    steps[sj].breakdown.ns[phase] += t_next - t;
    const bool tool = active_tool > 0 && phase == static_cast<int>(Phase::kOther);
    if (tool) steps[sj].tool_ns += t_next - t;
    if (joint != nullptr && !tool) {
      int light = static_cast<int>(Phase::kOther);
      for (int tier = 0; tier < kTiers; ++tier)
        if (active_light[tier] > 0) {
          light = static_cast<int>(kTierPhase[tier]);
          break;
        }
      const auto cell = static_cast<size_t>(light * kNumPhases + phase);
      joint->time[sj][cell] += t_next - t;
    }
    if (segments != nullptr && phase != static_cast<int>(Phase::kOther)) {
      auto& seg = *segments;
      if (!seg.empty() && seg.back().step == sj && seg.back().end_ns == t &&
          static_cast<int>(seg.back().phase) == phase)
        seg.back().end_ns = t_next;
      else
        seg.push_back({sj, t, t_next, static_cast<Phase>(phase)});
    }
  }
}

// The labelled intervals the breakdown is swept from.
std::vector<PhaseInterval> phase_intervals(const TimelineView& tv, const std::vector<Span>& passes,
                                           const std::vector<Span>& forward, const std::vector<Span>& evaluation) {
  const Run& run = tv.run;
  std::vector<PhaseInterval> intervals;
  for (const Span& e : evaluation) intervals.push_back({e.first, e.second, Phase::kEvaluation});
  for (const Span& p : passes) intervals.push_back({p.first, p.second, Phase::kBackward});
  for (const Span& f : forward) intervals.push_back({f.first, f.second, Phase::kForward});
  for (size_t i : tv.main_events) {
    const OpEvent& e = run.timeline[i];
    // User scopes are observed outside the detail windows too.
    const bool light = e.kind == OpKind::kUserScope;
    // The backward pass as the light events show it (the scope is also
    // inside `passes`, with the nodes, where there is detail).
    if (tv.is_backward_scope(e)) intervals.push_back({e.start_ns, e.end_ns, Phase::kBackward, false, true});
    if (tv.is_tool_scope(e)) intervals.push_back({e.start_ns, e.end_ns, Phase::kOther, false, true, false, true});
    if (tv.is_data(e)) intervals.push_back({e.start_ns, e.end_ns, Phase::kData, false, light});
    else if (tv.is_optimizer(e)) intervals.push_back({e.start_ns, e.end_ns, Phase::kOptimizer, false, light});
    else if (e.kind == OpKind::kOperator) intervals.push_back({e.start_ns, e.end_ns, Phase::kForward, true});
  }
  return intervals;
}

// Which steps are inside a detail window (Run::detail_spans, by time).
void mark_detailed(const Run& run, std::vector<Step>& steps) {
  if (run.detail_mode != "window") return;
  size_t k = 0;
  for (Step& st : steps) {
    while (k < run.detail_spans.size() && run.detail_spans[k].second < st.end_ns) ++k;
    st.detailed = k < run.detail_spans.size() && run.detail_spans[k].first <= st.start_ns;
  }
}

// The spans from a model.eval() to the next model.train() (the launcher's
// marks, python/torchneck/mode_marks.py) with no backward pass in them
// (`backward`: the backward scopes, sorted).
std::vector<Span> mode_evaluation(const TimelineView& tv, const std::vector<Span>& backward) {
  std::vector<Span> out;
  int64_t eval_start = -1;
  for (size_t i : tv.main_events) {
    const OpEvent& e = tv.run.timeline[i];
    if (tv.is_eval_mark(e) && eval_start < 0) {
      eval_start = e.start_ns;
    } else if (tv.is_train_mark(e) && eval_start >= 0) {
      auto b = std::lower_bound(backward.begin(), backward.end(), Span{eval_start, INT64_MIN});
      if (b == backward.end() || b->first >= e.end_ns) out.emplace_back(eval_start, e.end_ns);
      eval_start = -1;
    }
  }
  return out;
}

// Evaluation passes as the light events show them (in every step: in
// those outside detail windows they are the evaluation passes, their
// module calls not seen; in the detailed ones, where loop_spans.h finds
// them, they are what the estimate maps from): a run of at least
// kMinEvalFetches DataLoader fetches none of which a backward pass follows
// before the next fetch is a validation loop (its batches and the fetch
// that ends it); the pass lasts until the fetch that follows the run (the
// training loader's), or the step's end. A training fetch is followed by
// its backward pass (the launcher's torchneck::backward scope), so a
// training step is never one. Two loaders zipped are two fetches of which
// the first is followed by no backward: at least 2 such fetches in a row
// tell a validation loop from them.
// Also a span from a model.eval() to the next model.train() (the
// launcher's marks, python/torchneck/mode_marks.py) with no backward pass
// in it: an evaluation that reads no DataLoader (nanoGPT's estimate_loss).
constexpr size_t kMinEvalFetches = 2;
std::vector<Span> light_evaluation(const TimelineView& tv, const std::vector<Step>& steps) {
  const Run& run = tv.run;
  std::vector<Span> fetches, backward;
  for (size_t i : tv.main_events) {
    const OpEvent& e = run.timeline[i];
    if (tv.is_data(e)) fetches.emplace_back(e.start_ns, e.end_ns);
    else if (tv.is_backward_scope(e)) backward.emplace_back(e.start_ns, e.end_ns);
  }
  auto backward_in = [&](int64_t from, int64_t to) {
    auto it = std::lower_bound(backward.begin(), backward.end(), Span{from, INT64_MIN});
    return it != backward.end() && it->first < to;
  };
  std::vector<Span> out;
  size_t f = 0;
  for (const Step& st : steps) {
    while (f < fetches.size() && fetches[f].first < st.start_ns) ++f;
    size_t end = f;
    while (end < fetches.size() && fetches[end].first < st.end_ns) ++end;
    // fetches[f, end) lie in this step; a run of those no backward pass follows
    for (size_t k = f; k < end;) {
      size_t j = k;
      while (j < end && !backward_in(fetches[j].second, j + 1 < end ? fetches[j + 1].first : st.end_ns)) ++j;
      if (j - k >= kMinEvalFetches) out.emplace_back(fetches[k].first, j < end ? fetches[j].first : st.end_ns);
      k = j + 1;
    }
    f = end;
  }
  const std::vector<Span> by_mode = mode_evaluation(tv, backward);
  if (by_mode.empty()) return out;
  out.insert(out.end(), by_mode.begin(), by_mode.end());
  std::sort(out.begin(), out.end());
  std::vector<Span> merged;
  for (const Span& e : out) {
    if (!merged.empty() && e.first <= merged.back().second) merged.back().second = std::max(merged.back().second, e.second);
    else merged.push_back(e);
  }
  return merged;
}


// The calls without backward that are step work (`frozen`, indices into
// `forward`; `trained`: the roots with a training call; both from
// evaluation_passes), per root module, over the steps after warm-up whose
// module calls were recorded (those with a top-level call).
std::vector<FrozenForward> frozen_forwards(const Run& run, const std::vector<Span>& forward,
                                           const std::vector<uint32_t>& roots, const std::vector<size_t>& frozen,
                                           const std::set<uint32_t>& trained, const std::vector<Step>& steps) {
  auto step_of = [&](const Span& f) {
    auto it = std::upper_bound(steps.begin(), steps.end(), f.first,
                               [](int64_t t, const Step& s) { return t < s.start_ns; });
    if (it == steps.begin() || f.first >= std::prev(it)->end_ns) return SIZE_MAX;
    const Step& s = *std::prev(it);
    return s.steady || s.detail_excluded ? static_cast<size_t>(std::prev(it) - steps.begin()) : SIZE_MAX;
  };
  std::set<size_t> recorded;
  for (const Span& f : forward)
    if (const size_t k = step_of(f); k != SIZE_MAX) recorded.insert(k);
  std::map<uint32_t, FrozenForward> by_module;
  for (size_t i : frozen) {
    if (step_of(forward[i]) == SIZE_MAX) continue;
    FrozenForward& f = by_module[roots[i]];
    f.name = run.modules[roots[i]].name;
    f.trained = !is_frozen(run, roots[i]) && trained.count(roots[i]) > 0;
    ++f.calls;
    f.ns_per_step += forward[i].second - forward[i].first;
  }
  std::vector<FrozenForward> out;
  for (auto& [m, f] : by_module) {
    f.ns_per_step /= static_cast<int64_t>(std::max<size_t>(recorded.size(), 1));
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const FrozenForward& x, const FrozenForward& y) { return x.ns_per_step > y.ns_per_step; });
  return out;
}

// The breakdown of the steps outside detail windows (light_steps.h), learnt
// from the detailed steady steps (with none, the detailed warm-up steps).
void estimate_undetailed(StepAnalysis& a, const JointSweep& joint) {
  // A detailed step's time carries the detail's cost: the windows found
  // costly against their undetailed neighbours are left out of the time
  // statistics, which the undetailed steps then give undisturbed (a cheap
  // window, which the policy keeps on for most of the run, stays in).
  exclude_costly_detail(a.steps);
  std::vector<size_t> used;
  for (int pass = 0; pass < 2 && used.empty(); ++pass) {
    for (size_t i = 0; i < a.steps.size(); ++i)
      if (a.steps[i].detailed && (a.steps[i].steady || a.steps[i].detail_excluded || pass == 1)) used.push_back(i);
    if (pass == 0) a.detailed_steady = used.size();
  }
  // The detailed steps' phases carry the detail's own cost; within each
  // light phase it is taken as proportional to time, so the split is the
  // detailed steps' as measured. (Taking it out per detail-only event, the
  // earlier estimator, put the forward phase of tiny_ops 1-4 points low:
  // its "other" time carries more detail cost than its events say;
  // docs/overhead.md has the comparison.) The split is each detailed
  // step's own, their median, not their summed time's (light_steps.h).
  a.estimated_steps = estimate_light_steps(a.steps, learn_light_split(joint.time, used));
}

// The statistics over the steady steps: time-weighted (every steady step's
// whole time), their spread, and what the steps are made of.
// Each step's backward passes outside optimizer.step (Step::micro_batches):
// those inside it are a closure's (LBFGS), not micro-batches.
void count_micro_batches(std::vector<Step>& steps, const std::vector<Span>& passes, const std::vector<Span>& optimizer) {
  size_t pj = 0;
  for (Step& s : steps) {
    while (pj < passes.size() && passes[pj].first < s.start_ns) ++pj;
    for (size_t k = pj; k < passes.size() && passes[k].first < s.end_ns; ++k)
      if (!inside_any(optimizer, passes[k].first, passes[k].second)) ++s.micro_batches;
  }
}

void steady_statistics(StepAnalysis& a) {
  std::vector<int64_t> steady;
  std::vector<int> micro;
  StepBreakdown sum;
  double ops = 0, op_self = 0, sq = 0;
  size_t detailed = 0;
  for (Step& s : a.steps) {
    a.window_ns += s.duration();
    a.evaluation_ns += s.breakdown[Phase::kEvaluation];
    if (s.detailed && (s.steady || s.detail_excluded)) {  // its operators and backward passes were recorded
      micro.push_back(s.micro_batches);
      ops += static_cast<double>(s.ops);
      op_self += static_cast<double>(s.op_self_ns);
      ++detailed;
    }
    if (s.detail_excluded) {
      ++a.detail_excluded;
      continue;
    }
    if (!s.steady) {
      ++a.excluded;
      if (s.gpu_window) ++a.gpu_window_steps;
      continue;
    }
    steady.push_back(s.duration());
    for (int p = 0; p < kNumPhases; ++p) sum.ns[p] += s.breakdown.ns[p];
    a.steady_ns += s.duration();
  }
  a.steady_count = steady.size();
  a.median_ns = median(steady);
  if (steady.empty()) return;
  const auto n = static_cast<double>(steady.size());
  a.step_ns = static_cast<int64_t>(static_cast<double>(a.steady_ns) / n);
  int64_t assigned = 0;
  for (int p = 0; p < kNumPhases; ++p) {
    if (p == static_cast<int>(Phase::kOther)) continue;
    a.breakdown.ns[p] = static_cast<int64_t>(static_cast<double>(sum.ns[p]) / n);
    assigned += a.breakdown.ns[p];
  }
  a.breakdown.ns[static_cast<int>(Phase::kOther)] = a.step_ns - assigned;  // exact sum despite rounding
  const double mean = static_cast<double>(a.steady_ns) / n;
  for (int64_t d : steady) sq += (static_cast<double>(d) - mean) * (static_cast<double>(d) - mean);
  a.step_cv = steady.size() > 1 && mean > 0 ? std::sqrt(sq / (n - 1)) / mean : 0;
  if (detailed == 0) return;
  a.micro_batches_per_step = middle_value(std::move(micro));
  a.ops_per_step = ops / static_cast<double>(detailed);
  a.op_self_ns_per_step = op_self / static_cast<double>(detailed);
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

std::vector<PhaseSegment> phase_segments(const Run& run, const StepAnalysis& analysis, size_t max_steps) {
  std::vector<PhaseSegment> segments;
  if (analysis.steps.empty() || max_steps == 0) return segments;
  const TimelineView tv(run);
  std::vector<Step> steps(analysis.steps.begin(),
                          analysis.steps.begin() + static_cast<std::ptrdiff_t>(std::min(max_steps, analysis.steps.size())));
  for (Step& s : steps) s.breakdown = StepBreakdown{};
  // Only what overlaps the steps kept is swept (an interval's edges outside
  // every step only add points no step reads).
  const int64_t from = steps.front().start_ns, until = steps.back().end_ns;
  std::vector<PhaseInterval> intervals =
      phase_intervals(tv, backward_passes(tv), module_spans(tv), analysis.evaluation);
  intervals.erase(std::remove_if(intervals.begin(), intervals.end(),
                                 [&](const PhaseInterval& iv) { return iv.start_ns >= until || iv.end_ns <= from; }),
                  intervals.end());
  sweep(intervals, steps, &segments);
  return segments;
}

StepAnalysis analyze_steps(const Run& run) {
  StepAnalysis a;
  a.timeline_truncated = run.dropped_events > 0;
  const TimelineView tv(run);
  const std::vector<Span> passes = backward_passes(tv);
  std::vector<uint32_t> roots;
  const std::vector<Span> forward = module_spans(tv, &roots);
  std::vector<size_t> frozen;
  std::set<uint32_t> trained;
  a.evaluation = evaluation_passes(tv, passes, forward, roots, &frozen, &trained);
  for (const Span& s : detect_steps(tv, passes, forward, roots, a.evaluation, &a.source)) {
    Step st;
    st.start_ns = s.first;
    st.end_ns = s.second;
    a.steps.push_back(st);
  }
  a.detail_mode = run.detail_mode;
  mark_detailed(run, a.steps);
  const std::vector<Span> light_eval = light_evaluation(tv, a.steps);
  {
    size_t k = 0;
    const size_t before = a.evaluation.size();
    for (const Span& e : light_eval) {
      while (k < a.steps.size() && a.steps[k].end_ns <= e.first) ++k;
      if (k < a.steps.size() && !a.steps[k].detailed) a.evaluation.push_back(e);
    }
    if (a.evaluation.size() != before) std::sort(a.evaluation.begin(), a.evaluation.end());
  }
  JointSweep joint;
  std::vector<PhaseInterval> intervals = phase_intervals(tv, passes, forward, a.evaluation);
  for (const Span& e : light_eval) intervals.push_back({e.first, e.second, Phase::kEvaluation, false, true, true});
  sweep(intervals, a.steps, nullptr, &joint);
  // Operators per step (all nesting levels) and their self time, and the
  // top-level ones, those of evaluation passes and DataLoader fetches left
  // out: they are not the training step's compute.
  const std::vector<Span> fetches = fetch_spans(run);
  std::vector<TopLevelOp> top_level;
  int64_t top_end = INT64_MIN;  // the end of the last operator inside no other
  size_t sj = 0;
  for (size_t i : tv.main_events) {
    const OpEvent& e = run.timeline[i];
    if (e.kind != OpKind::kOperator) continue;
    const bool top = e.start_ns >= top_end;
    if (top) top_end = e.end_ns;
    while (sj < a.steps.size() && a.steps[sj].end_ns <= e.start_ns) ++sj;
    if (sj >= a.steps.size()) break;
    if (e.start_ns < a.steps[sj].start_ns || inside_any(a.evaluation, e.start_ns, e.end_ns) ||
        inside_any(fetches, e.start_ns, e.end_ns))
      continue;
    ++a.steps[sj].ops;
    a.steps[sj].op_self_ns += tv.self_ns[i];
    if (top) top_level.push_back({sj, e.end_ns - e.start_ns, e.name_id});
  }
  const GpuWindow& w = run.gpu_window;
  const Span window{w.start_ns, w.end_ns};
  mark_steady(a, compile_spans(run), w.state == GpuWindowState::kRecorded && w.end_ns > w.start_ns ? &window : nullptr);
  a.frozen = frozen_forwards(run, forward, roots, frozen, trained, a.steps);
  std::vector<Span> optimizer;
  for (size_t i : tv.main_events)
    if (tv.is_optimizer_step(run.timeline[i])) optimizer.emplace_back(run.timeline[i].start_ns, run.timeline[i].end_ns);
  count_micro_batches(a.steps, passes, optimizer);  // before the estimate: a light step's passes are its loop bodies
  estimate_undetailed(a, joint);
  a.count = a.steps.size();
  // The window can fill before the first optimizer.step ends (LBFGS: a
  // million operators in its closures): the run's optimizer steps are then
  // still counted, from the aggregates, whatever bounded the window's steps.
  if (a.timeline_truncated && a.source != "optimizer" && a.source != "profiler_step")
    for (const OpStats& op : run.ops)
      if (op.kind == OpKind::kUserScope && op.name.rfind("Optimizer.step#", 0) == 0 && op.calls > 0) {
        a.count_source = "optimizer";
        break;
      }
  const std::string& counted = a.count_source.empty() ? a.source : a.count_source;
  if (a.timeline_truncated && (counted == "optimizer" || counted == "dataloader" || counted == "profiler_step")) {
    uint64_t calls = 0;
    int64_t inside_ns = 0;
    const char* prefix = counted == "optimizer"       ? "Optimizer.step#"
                         : counted == "profiler_step" ? "ProfilerStep#"
                                                      : "enumerate(DataLoader)";
    for (const OpStats& op : run.ops)
      if (op.kind == OpKind::kUserScope && op.name.rfind(prefix, 0) == 0) {
        calls += op.calls;
        inside_ns += op.total_ns;
      }
    size_t k = 1;
    if (counted == "optimizer") {
      // As many optimizer steps an iteration as in the timeline's.
      k = std::max<size_t>(1, optimizer_steps_per_iteration(tv, a.steps.size()));
      if (calls % k != 0) k = 1;
    } else if (counted == "dataloader") {
      // Each epoch's last fetch only raises StopIteration.
      k = 1;
      calls -= std::min<uint64_t>(calls, run.env.dataloaders.empty() ? 0 : 1);
    }
    a.count = a.count_source.empty() ? std::max<size_t>(a.count, static_cast<size_t>(calls / k))
                                     : static_cast<size_t>(calls / k);
    if (!a.count_source.empty() && a.count > 0) a.counted_step_ns = inside_ns / static_cast<int64_t>(a.count);
  }
  steady_statistics(a);
  a.top_level_ops = summarize_top_level_ops(run, a.steps, top_level);
  classify_slow_steps(run, a);
  // Steps counted by their boundaries (optimizer.step, profiler.step) over
  // the whole run: the step clocks are at the same boundaries.
  if (a.timeline_truncated && !a.steps.empty() && (counted == "optimizer" || counted == "profiler_step"))
    a.whole_run = run_clocks(run, a.count, a.steps.back().end_ns);
  return a;
}

}  // namespace torchneck
