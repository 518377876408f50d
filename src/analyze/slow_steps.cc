#include "analyze/slow_steps.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "model/processes.h"  // short_function_label

namespace torchneck {
namespace {

SlowGroup group_of(SlowKind kind) {
  SlowGroup g;
  g.kind = kind;
  return g;
}

// Slow: more than twice the fast steps' level (their 25th percentile: with
// k loader workers, up to every other step can be slow, so the median may
// be a slow one). Twice is far beyond this machine's step-to-step noise.
constexpr double kSlowFactor = 2.0;
// The level is local: the 25th percentile of the steady steps within this
// many steady steps on either side, and within this many steps. A loop
// whose steps grow slower (state that grows: step_time_drift) would
// otherwise have its late steps all "slow" against its early ones, and the
// drift hidden among one-off slow steps; 10 a side still holds ten fast
// steps of a loader's bursts of 2 and all but one of a periodic stall's.
constexpr size_t kLocalHalfWindow = 10;
// Too few steady steps to tell a pattern from chance.
constexpr size_t kMinSteps = 4;
// A step is an evaluation one when its evaluation passes hold at least half
// of its extra time.
constexpr double kEvaluationPart = 0.5;
// A period is a pattern when it recurs at least 3 times and 3 in 4 of the
// steps at its positions are slow (a burst can land one step late).
constexpr size_t kMinOccurrences = 3;
constexpr double kPeriodCoverage = 0.75;
// Periods up to a thousand steps (a checkpoint every 500 steps), which keeps
// the search linear in the steps.
constexpr size_t kMaxPeriod = 1000;
// "What runs in the slow steps": a Python function is specific to them when
// it runs under a fifth of the typical steps' time (the loop's own frames,
// the model's, the loader's __next__ run in every step) and holds at least
// 30 % of the slow steps' extra time.
constexpr double kSpecificMaxTypicalShare = 0.2;
constexpr double kSpecificShareOfExcess = 0.3;

int64_t percentile(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

// The function specific to the slow steps, outermost first, and the
// library function it calls ("a -> b"), from the sampler's timeline.
std::string what_runs(const Run& run, const StepAnalysis& a, const std::vector<size_t>& slow,
                      const std::vector<size_t>& typical, int64_t excess) {
  if (run.samples.empty() || slow.empty() || typical.empty()) return "";
  auto step_of = [&](int64_t t) -> const Step* {
    auto it = std::upper_bound(a.steps.begin(), a.steps.end(), t,
                               [](int64_t x, const Step& s) { return x < s.start_ns; });
    if (it == a.steps.begin()) return nullptr;
    --it;
    return t < it->end_ns ? &*it : nullptr;
  };
  std::vector<char> in_slow(a.steps.size(), 0), in_typical(a.steps.size(), 0);
  for (size_t i : slow) in_slow[i] = 1;
  for (size_t i : typical) in_typical[i] = 1;
  std::unordered_map<uint32_t, int64_t> slow_w, typical_w;
  int64_t typical_total = 0;
  auto each_frame = [&](const PySample& s, auto&& fn) {
    std::vector<uint32_t> seen;
    for (uint32_t f : run.stacks[s.stack].frames)
      if (std::find(seen.begin(), seen.end(), f) == seen.end()) {
        seen.push_back(f);
        fn(f);
      }
  };
  for (const PySample& s : run.samples) {
    if (s.thread_index != run.main_thread || s.stack >= run.stacks.size()) continue;
    const Step* st = step_of(s.t_ns);
    if (st == nullptr) continue;
    const size_t i = static_cast<size_t>(st - a.steps.data());
    if (in_slow[i]) each_frame(s, [&](uint32_t f) { slow_w[f] += s.weight_ns; });
    else if (in_typical[i]) {
      typical_total += s.weight_ns;
      each_frame(s, [&](uint32_t f) { typical_w[f] += s.weight_ns; });
    }
  }
  if (typical_total <= 0) return "";
  const double scale = static_cast<double>(slow.size()) / static_cast<double>(typical.size());
  auto specific = [&](uint32_t f) {
    const auto w = static_cast<double>(slow_w[f]);
    const auto t = static_cast<double>(typical_w[f]);
    return w - scale * t >= kSpecificShareOfExcess * static_cast<double>(excess) &&
           t <= kSpecificMaxTypicalShare * static_cast<double>(typical_total);
  };
  // The outermost specific frame of each slow-step sample, and the frame it
  // calls in another file.
  std::unordered_map<uint32_t, int64_t> outer_w;
  std::unordered_map<uint64_t, int64_t> callee_w;
  for (const PySample& s : run.samples) {
    if (s.thread_index != run.main_thread || s.stack >= run.stacks.size()) continue;
    const Step* st = step_of(s.t_ns);
    if (st == nullptr || !in_slow[static_cast<size_t>(st - a.steps.data())]) continue;
    const auto& frames = run.stacks[s.stack].frames;
    for (size_t k = 0; k < frames.size(); ++k) {
      if (!specific(frames[k])) continue;
      outer_w[frames[k]] += s.weight_ns;
      for (size_t c = k + 1; c < frames.size(); ++c)
        if (run.python[frames[c]].file != run.python[frames[k]].file && !run.python[frames[c]].builtin) {
          callee_w[(static_cast<uint64_t>(frames[k]) << 32) | frames[c]] += s.weight_ns;
          break;
        }
      break;
    }
  }
  if (outer_w.empty()) return "";
  const auto top = std::max_element(outer_w.begin(), outer_w.end(), [](const auto& x, const auto& y) {
    return x.second != y.second ? x.second < y.second : x.first > y.first;
  });
  std::string label = short_function_label(run.python[top->first]);
  uint32_t callee = 0;
  int64_t best = 0;
  for (const auto& [key, w] : callee_w)
    if (static_cast<uint32_t>(key >> 32) == top->first && w > best) {
      best = w;
      callee = static_cast<uint32_t>(key & 0xffffffffu);
    }
  if (best > 0) label += " -> " + short_function_label(run.python[callee]);
  return label;
}

void describe(const Run& run, StepAnalysis& a, SlowGroup& g, const std::vector<size_t>& typical) {
  for (size_t i : g.steps) g.excess_ns += std::max<int64_t>(0, a.steps[i].undetailed_ns() - a.typical_ns);
  g.over_ns = a.steady_ns;
  for (const Step& s : a.steps)
    if (s.detail_excluded) g.over_ns += s.undetailed_ns();
  g.share = g.over_ns > 0 ? static_cast<double>(g.excess_ns) / static_cast<double>(g.over_ns) : 0;
  double best = -1;
  for (int p = 0; p < kNumPhases; ++p) {
    double slow = 0, typ = 0;
    for (size_t i : g.steps) slow += static_cast<double>(a.steps[i].breakdown.ns[p]);
    for (size_t i : typical) typ += static_cast<double>(a.steps[i].breakdown.ns[p]);
    slow /= static_cast<double>(g.steps.size());
    typ = typical.empty() ? 0 : typ / static_cast<double>(typical.size());
    if (slow - typ > best) {
      best = slow - typ;
      g.phase = static_cast<Phase>(p);
      g.phase_slow_ns = static_cast<int64_t>(slow);
      g.phase_typical_ns = static_cast<int64_t>(typ);
    }
  }
  g.what = what_runs(run, a, g.steps, typical, g.excess_ns);
}


// The mean step's relative standard error, stratified by kind of step: a
// loader's bursts alternate fast and slow steps by design, and the mean of
// such a run is known far better than their spread alone would say.
void mean_error(StepAnalysis& a) {
  if (a.steady_count < 2 || a.steady_ns <= 0) return;
  double var_of_mean = 0;
  const auto n = static_cast<double>(a.steady_count);
  for (int k = 0; k < 4; ++k) {
    std::vector<double> d;
    for (const Step& s : a.steps)
      if (s.steady && static_cast<int>(s.slow) == k) d.push_back(static_cast<double>(s.duration()));
    if (d.size() < 2) continue;
    double m = 0, v = 0;
    for (double x : d) m += x;
    m /= static_cast<double>(d.size());
    for (double x : d) v += (x - m) * (x - m);
    v /= static_cast<double>(d.size() - 1);
    const double w = static_cast<double>(d.size()) / n;
    var_of_mean += w * w * v / static_cast<double>(d.size());
  }
  a.mean_error = std::sqrt(var_of_mean) / (static_cast<double>(a.steady_ns) / n);
}

void classify(const Run& run, StepAnalysis& a) {
  // The steady steps, and those of costly detail windows at their time less
  // the window's cost (Step::undetailed_ns): a checkpoint every 5 steps
  // that falls in windows is still every 5 steps. (`steady` below: both.)
  std::vector<size_t> steady;
  std::vector<int64_t> d;
  for (size_t i = 0; i < a.steps.size(); ++i)
    if (a.steps[i].steady || a.steps[i].detail_excluded) {
      steady.push_back(i);
      d.push_back(a.steps[i].undetailed_ns());
    }
  a.typical_ns = a.median_ns;
  if (steady.size() < kMinSteps) return;
  std::vector<size_t> slow, typical;
  std::vector<int64_t> typical_d;
  std::vector<int64_t> local_level(a.steps.size(), 0);  // a slow step's neighbours' level
  for (size_t j = 0; j < steady.size(); ++j) {
    const size_t i = steady[j];
    size_t lo = j >= kLocalHalfWindow ? j - kLocalHalfWindow : 0;
    size_t hi = std::min(steady.size(), j + kLocalHalfWindow + 1);
    // Nor farther in the run: past a stretch of steps that are not steady
    // (a costly detail window, left out), the steady steps are as far from
    // this one as the run's start is in a drift.
    while (steady[lo] + kLocalHalfWindow < i) ++lo;
    while (steady[hi - 1] > i + kLocalHalfWindow) --hi;
    const int64_t level = percentile({d.begin() + static_cast<std::ptrdiff_t>(lo), d.begin() + static_cast<std::ptrdiff_t>(hi)}, 0.25);
    if (static_cast<double>(a.steps[i].undetailed_ns()) > kSlowFactor * static_cast<double>(level)) {
      slow.push_back(i);
      local_level[i] = level;
    } else {
      typical.push_back(i);
      if (a.steps[i].steady) typical_d.push_back(a.steps[i].duration());
    }
  }
  if (slow.empty()) return;
  if (!typical_d.empty()) a.typical_ns = percentile(typical_d, 0.5);
  // Evaluation steps first: their pass explains them, whatever their place.
  // The extra time is over the step's neighbours (in a drift the run's
  // typical step can be longer than a late slow one's neighbours).
  SlowGroup eval = group_of(SlowKind::kEvaluation);
  std::vector<size_t> rest;
  for (size_t i : slow) {
    const Step& s = a.steps[i];
    const auto extra = static_cast<double>(s.undetailed_ns() - local_level[i]);
    const auto evaluation = static_cast<double>(s.breakdown[Phase::kEvaluation]);
    if (evaluation > 0 && evaluation >= kEvaluationPart * extra) eval.steps.push_back(i);
    else rest.push_back(i);
  }
  // The period (and phase) covering most of the rest; the shorter on a tie.
  std::vector<char> is_slow(a.steps.size(), 0), is_steady(a.steps.size(), 0);
  for (size_t i : rest) is_slow[i] = 1;
  for (size_t i : steady) is_steady[i] = 1;
  // Each period costs one pass over the steps: O(steps x kMaxPeriod).
  SlowGroup periodic = group_of(SlowKind::kPeriodic);
  size_t best = 0, best_p = 0, best_r = 0;
  for (size_t p = 2; p * kMinOccurrences <= steady.size() && p <= kMaxPeriod; ++p)
    for (size_t r = 0; r < p; ++r) {
      size_t members = 0, hits = 0;
      for (size_t i = r; i < a.steps.size(); i += p) {
        if (!is_steady[i]) continue;
        ++members;
        hits += is_slow[i];
      }
      if (hits < kMinOccurrences || static_cast<double>(hits) < kPeriodCoverage * static_cast<double>(members) ||
          hits <= best)
        continue;
      best = hits;
      best_p = p;
      best_r = r;
    }
  if (best > 0) {
    for (size_t i = best_r; i < a.steps.size(); i += best_p)
      if (is_slow[i]) periodic.steps.push_back(i);
    periodic.period = static_cast<int>(best_p);
    periodic.first = periodic.steps.front();
  }
  SlowGroup one_off = group_of(SlowKind::kOneOff);
  for (size_t i : rest)
    if (!std::binary_search(periodic.steps.begin(), periodic.steps.end(), i)) one_off.steps.push_back(i);
  for (SlowGroup* g : {&periodic, &eval, &one_off}) {
    if (g->steps.empty()) continue;
    for (size_t i : g->steps) a.steps[i].slow = g->kind;
    describe(run, a, *g, typical);
    a.slow.push_back(std::move(*g));
  }
}

}  // namespace

void classify_slow_steps(const Run& run, StepAnalysis& a) {
  classify(run, a);
  mean_error(a);
}

}  // namespace torchneck
