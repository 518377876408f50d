// step_time_drift: steps get slower over the run (state that grows: a list
// of tensors, a graph kept alive, a cache; often with memory_creep).
#include <algorithm>
#include <cmath>

#include "analyze/detectors/shared_thresholds.h"
#include "analyze/diagnosis.h"
#include "core/stats.h"

namespace torchneck {
namespace {

// Thirds of at least 7 steps each, or no trend can be told from noise.
constexpr size_t kMinSteps = 21;
// A fifth slower at the end is felt in a long run; half is the main cost.
constexpr double kDriftShare = 0.20;
constexpr double kDriftHighShare = 0.50;
// And not noise: the thirds' means differ by 3 standard errors, the middle
// third lies between the others, and step time rises with the step index
// throughout (Spearman's rank correlation, kMinRankCorrelation). A machine that slows
// down once, mid-run (another process starting), shifts the thirds but
// rarely makes a trend that steady; growing state does.
constexpr double kMinStandardErrors = 3.0;
constexpr double kMinRankCorrelation = 0.7;
// The rank correlation is read over the least of every kBlockSteps
// consecutive typical steps: what else runs on the machine (a preemption,
// another process's cache traffic) only ever makes a step slower, so the
// least of a few neighbours is the work the step did (docs/diagnosis.md,
// "Not crying wolf"). A shift mid-run is still held back by the thirds.
constexpr size_t kBlockSteps = 3;

// Spearman's rank correlation of v with its index (ties ranked by order).
double rank_correlation(const std::vector<double>& v) {
  const size_t n = v.size();
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  double d2 = 0;
  for (size_t r = 0; r < n; ++r) {
    const double d = static_cast<double>(r) - static_cast<double>(order[r]);
    d2 += d * d;
  }
  const auto m = static_cast<double>(n);
  return 1.0 - 6.0 * d2 / (m * (m * m - 1.0));
}

// The least of each run of kBlockSteps steps (a last, shorter run left out).
std::vector<double> block_minima(const std::vector<double>& v) {
  std::vector<double> m;
  for (size_t i = 0; i + kBlockSteps <= v.size(); i += kBlockSteps)
    m.push_back(*std::min_element(v.begin() + static_cast<std::ptrdiff_t>(i),
                                  v.begin() + static_cast<std::ptrdiff_t>(i + kBlockSteps)));
  return m;
}

struct Third {
  double median = 0, mean = 0, var = 0;
  size_t n = 0;
};

Third third(std::vector<double> v) {
  Third t;
  t.n = v.size();
  for (double x : v) t.mean += x;
  t.mean /= static_cast<double>(t.n);
  for (double x : v) t.var += (x - t.mean) * (x - t.mean);
  t.var /= static_cast<double>(std::max<size_t>(1, t.n - 1));
  t.median = middle_value(std::move(v));
  return t;
}

// Where the timeline holds only the run's first part (StepAnalysis::
// whole_run), the trend is read over the whole run by the step clocks: the
// mean step of each interval between kept clocks (every step of a run of a
// few thousand, every 2nd, 4th, ... of a longer one), from the timeline's
// first steady step on (warm-up left out), the last, shorter interval left
// out. A run that slows down after its timeline filled showed no drift
// before: its trend was read over the steps in the timeline only. Slow steps
// are inside the intervals' means here, at their share of an interval.
std::vector<double> whole_run_intervals(const StepAnalysis& s, uint64_t* per_interval) {
  std::vector<double> d;
  int64_t from = -1;
  for (const Step& st : s.steps)
    if (st.steady) {
      from = st.start_ns;
      break;
    }
  if (from < 0) return d;
  const std::vector<ClockInterval>& v = s.whole_run.intervals;
  size_t n = v.size();
  if (n >= 2 && v[n - 1].steps != v[n - 2].steps) --n;
  for (size_t i = 0; i < n; ++i)
    if (v[i].start_ns >= from) {
      d.push_back(v[i].step_ns);
      *per_interval = v[i].steps;
    }
  return d;
}

}  // namespace

void detect_step_time_drift(const DiagnosisInput& in, std::vector<Finding>& out) {
  const StepAnalysis& s = in.steps;
  // Typical steps only: slow steps have causes of their own (periodic_stall).
  // And the steps of costly detail windows, left out of the step times, at
  // their time less the window's measured cost (steps.h,
  // Step::undetailed_ns): without them a short run loses its early steps to
  // the first windows, and the trend is read over its second half only.
  std::vector<double> d;
  size_t corrected = 0;
  uint64_t per_interval = 0;  // > 0: d holds the clocks' intervals, of this many steps
  if (!s.whole_run.empty()) d = whole_run_intervals(s, &per_interval);
  if (d.size() < kMinSteps) {
    d.clear();
    per_interval = 0;
    for (const Step& st : s.steps)
      if ((st.steady || st.detail_excluded) && st.slow == SlowKind::kNone) {
        d.push_back(static_cast<double>(st.undetailed_ns()));
        corrected += st.detail_excluded ? 1 : 0;
      }
  }
  if (d.size() < kMinSteps) return;
  const size_t k = d.size() / 3;
  const Third first = third({d.begin(), d.begin() + static_cast<std::ptrdiff_t>(k)});
  const Third last = third({d.end() - static_cast<std::ptrdiff_t>(k), d.end()});
  const Third middle = third({d.begin() + static_cast<std::ptrdiff_t>(k), d.end() - static_cast<std::ptrdiff_t>(k)});
  if (first.median <= 0 || !(first.median < middle.median && middle.median < last.median)) return;
  const double rho = rank_correlation(block_minima(d));
  if (rho < kMinRankCorrelation) return;
  const double growth = last.median / first.median - 1.0;
  const double se = std::sqrt(first.var / static_cast<double>(first.n) + last.var / static_cast<double>(last.n));
  if (growth < kDriftShare || last.mean - first.mean < kMinStandardErrors * se) return;
  Finding f = make_finding(FindingId::step_time_drift);
  if (growth >= kDriftHighShare) f.severity = Severity::kHigh;
  // A busy machine slows every step down too, and one run cannot tell its
  // slowing from the script's: with the loop waiting for a CPU that long,
  // the drift is shown as low.
  const bool busy = in.main_runqueue_fraction >= thresholds::kContendedRunqueueShare;
  if (busy) f.severity = Severity::kLow;
  f.title = "Steps get slower over the run: the last third " + fmt_pct(growth) + " slower than the first";
  if (per_interval > 0)
    f.evidence.push_back("the whole run by its step clocks (the timeline holds its first " +
                         std::to_string(s.steps.size()) + " steps of " + std::to_string(s.count) + "), " +
                         (per_interval == 1 ? std::to_string(d.size()) + " steps one by one"
                                            : "in " + std::to_string(d.size()) + " runs of " +
                                                  std::to_string(per_interval) + " steps") +
                         ": the first " + std::to_string(k) + " take " +
                         fmt_ms(static_cast<int64_t>(first.median)) + " a step (median), the last " +
                         std::to_string(k) + " " + fmt_ms(static_cast<int64_t>(last.median)));
  else
    f.evidence.push_back("typical steps (" + std::to_string(d.size()) + "): the first " + std::to_string(k) +
                         " take " + fmt_ms(static_cast<int64_t>(first.median)) + " (median), the last " +
                         std::to_string(k) + " " + fmt_ms(static_cast<int64_t>(last.median)) +
                         (corrected > 0 ? " (" + std::to_string(corrected) +
                                              " of them detailed, at their time less the detail's measured cost)"
                                        : std::string()));
  f.evidence.push_back("the difference of their means is " +
                       std::to_string(static_cast<int>((last.mean - first.mean) / std::max(se, 1.0))) +
                       " standard errors, and step time rises with the step (rank correlation " +
                       std::to_string(static_cast<int>(100 * rho)) + " %, over the least of every " +
                       std::to_string(kBlockSteps) + (per_interval > 1 ? " runs" : " steps") + "): not noise");
  if (busy)
    f.evidence.push_back("caution: the loop waited for a CPU " + fmt_pct(in.main_runqueue_fraction) +
                         " of the training loop: the machine may have slowed down, not the script");
  // The step's own autograd graph, rebuilt larger every step: the work of
  // the step grows with something the script keeps (graph_watch.py).
  const GrowingGraph* rebuilt = nullptr;
  for (const GrowingGraph& g : in.growing_graphs)
    if (!g.kept) {
      rebuilt = &g;
      break;
    }
  if (rebuilt != nullptr) {
    f.evidence.push_back(
        "the autograd graph of `" + rebuilt->variable + "` (" +
        (rebuilt->scope == "<module>" ? std::string("a global of the script") : "a local of " + rebuilt->scope + "()") +
        ") is built anew every step, and larger every time: " + std::to_string(rebuilt->nodes_first) +
        " nodes at optimizer step " + std::to_string(rebuilt->step_first) + ", " +
        std::to_string(rebuilt->nodes_last) + (rebuilt->nodes_last >= rebuilt->nodes_cap && rebuilt->nodes_cap > 0 ? "+" : "") +
        " at step " + std::to_string(rebuilt->step_last) + ": each step computes more");
    f.recommendation = "the step computes `" + rebuilt->variable +
                       "` over something that grows every step (a Python loop over a list of kept tensors, a "
                       "penalty over all past snapshots): bound it (the last k entries) or keep a running summary "
                       "(one tensor updated in place) instead of the whole history";
  } else {
    f.recommendation = "look for state that grows step after step: tensors appended to a list, a loss accumulated "
                       "with its graph (total += loss instead of loss.item()), a growing cache; see memory_creep";
  }
  // Over the whole run by its clocks, the mean of the spans (equal in
  // steps) is the typical step over the run itself, and the step the gain
  // is a share of: a trend that starts late is no line from end to end (a
  // run flat for its first 350 steps of 600 had that line at 15.1 ms, its
  // mean at 11.0).
  double mean = 0.5 * (first.mean + last.mean);  // the typical step over the run, as a line
  double step = static_cast<double>(s.step_ns);
  if (per_interval > 0) {
    mean = 0;
    for (double x : d) mean += x;
    step = mean /= static_cast<double>(d.size());
  }
  if (step > 0) {
    f.estimated_gain_pct = 100.0 * std::max(0.0, (mean - first.median) / step);
    f.gain_arithmetic = "typical step " + fmt_ms(static_cast<int64_t>(mean)) + " on average over the run, " +
                        fmt_ms(static_cast<int64_t>(first.median)) + " if it stayed as at the start, over the step " +
                        fmt_ms(static_cast<int64_t>(step));
  }
  f.numbers = {{"growth_pct", 100.0 * growth}};
  out.push_back(std::move(f));
}

}  // namespace torchneck
