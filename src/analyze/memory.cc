#include "analyze/memory.h"

#include <algorithm>
#include <vector>

namespace torchneck {
namespace {

// Samples needed in the steady span before a line is fitted: fewer say
// nothing about a trend.
constexpr size_t kMinFitSamples = 5;

// Records of `v` whose time lies in [a, b], times their size.
template <typename T, typename Time>
double bytes_in(const std::vector<T>& v, int64_t a, int64_t b, Time time) {
  size_t n = 0;
  for (const T& x : v) n += time(x) >= a && time(x) <= b;
  return static_cast<double>(n) * sizeof(T);
}

}  // namespace

SteadySpan steady_span(const StepAnalysis& steps) {
  SteadySpan s;
  for (size_t i = 0; i < steps.steps.size(); ++i) {
    if (!steps.steps[i].steady) continue;
    if (!s.found) s.first = i;
    s.found = true;
    s.last = i;
  }
  if (s.found) {
    s.start_ns = steps.steps[s.first].start_ns;
    s.end_ns = steps.steps[s.last].end_ns;
  }
  // A run whose timeline ended before it did: the span goes on to its last
  // step by the step clocks (StepAnalysis::whole_run), so the memory and
  // GPU samples and the collections are read over the whole run, not over
  // the timeline's first part (a script whose memory grew after its
  // timeline filled was "too few samples in the steady steps to fit").
  const RunClocks& c = steps.whole_run;
  if (s.found && !c.empty() && !c.intervals.empty() && c.intervals.back().end_ns > s.end_ns) {
    s.end_ns = c.intervals.back().end_ns;
    s.last = std::max<size_t>(s.last, static_cast<size_t>(c.last_step) - 1);  // steps from 0, as the timeline's
  }
  return s;
}

LineFit fit_line(const double* t, const double* y, size_t n) {
  LineFit f;
  f.points = n;
  if (n == 0) return f;
  double mt = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    mt += t[i];
    my += y[i];
  }
  mt /= static_cast<double>(n);
  my /= static_cast<double>(n);
  double stt = 0, sty = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    stt += (t[i] - mt) * (t[i] - mt);
    sty += (t[i] - mt) * (y[i] - my);
    syy += (y[i] - my) * (y[i] - my);
  }
  f.slope = stt > 0 ? sty / stt : 0;
  f.intercept = my - f.slope * mt;
  f.r2 = stt > 0 && syy > 0 ? (sty * sty) / (stt * syy) : 0;
  return f;
}

MemoryAnalysis analyze_memory(const Run& run, const StepAnalysis& steps) {
  MemoryAnalysis m;
  const std::vector<MemorySample>& ms = run.memory;
  if (ms.empty()) return m;
  m.sampled = true;
  m.samples = ms.size();
  m.interval_ns = run.memory_interval_ns;
  m.rss_first = ms.front().rss_bytes;
  m.rss_last = ms.back().rss_bytes;
  for (const MemorySample& s : ms)
    if (s.rss_bytes > m.rss_peak) {
      m.rss_peak = s.rss_bytes;
      m.peak_t_ns = s.t_ns;
    }
  m.torch_counted = true;
  for (const MemorySample& s : ms) m.torch_counted = m.torch_counted && s.torch_allocated_bytes >= 0;
  if (m.torch_counted) {
    m.torch_first = ms.front().torch_allocated_bytes;
    m.torch_last = ms.back().torch_allocated_bytes;
    for (const MemorySample& s : ms) m.torch_peak = std::max(m.torch_peak, s.torch_allocated_bytes);
  }
  m.span = steady_span(steps);
  if (!m.span.found) return m;
  std::vector<double> t, y, torch;
  for (const MemorySample& s : ms)
    if (s.t_ns >= m.span.start_ns && s.t_ns <= m.span.end_ns) {
      t.push_back(static_cast<double>(s.t_ns - m.span.start_ns) / 1e9);
      y.push_back(static_cast<double>(s.rss_bytes));
      torch.push_back(static_cast<double>(s.torch_allocated_bytes));
    }
  m.fit_samples = t.size();
  if (t.empty()) return m;
  if (t.size() < kMinFitSamples) {
    m.rss_steady_start = static_cast<int64_t>(y.front());
    if (m.torch_counted) m.torch_steady_start = static_cast<int64_t>(torch.front());
    return m;
  }
  m.fitted = true;
  m.fit = fit_line(t.data(), y.data(), t.size());
  const double span_s = static_cast<double>(m.span.end_ns - m.span.start_ns) / 1e9;
  if (m.torch_counted) {
    const LineFit tf = fit_line(t.data(), torch.data(), t.size());
    m.torch_steady_start = static_cast<int64_t>(tf.intercept);
    m.torch_growth_bytes = tf.slope * span_s;
    m.torch_r2 = tf.r2;
  }
  m.rss_steady_start = static_cast<int64_t>(m.fit.intercept);
  m.growth_bytes = m.fit.slope * span_s;
  m.growth_per_step_bytes = m.growth_bytes / static_cast<double>(m.span.steps());
  const int64_t a = m.span.start_ns, b = m.span.end_ns;
  m.recorded_bytes = bytes_in(run.timeline, a, b, [](const OpEvent& e) { return e.start_ns; }) +
                     bytes_in(run.module_events, a, b, [](const ModuleEvent& e) { return e.t_ns; }) +
                     bytes_in(run.samples, a, b, [](const PySample& e) { return e.t_ns; }) +
                     bytes_in(run.py_frames, a, b, [](const PyFrameEvent& e) { return e.start_ns; });
  const double half = span_s / 2;
  size_t from = 0;
  while (from < t.size() && t[from] < half) ++from;
  if (t.size() - from >= 2) m.late_fit = fit_line(t.data() + from, y.data() + from, t.size() - from);
  return m;
}

GcAnalysis analyze_gc(const Run& run, const StepAnalysis& steps) {
  GcAnalysis g;
  g.observed = run.gc_observed;
  g.totals = run.gc;
  g.span = steady_span(steps);
  if (!g.observed || !g.span.found) return g;
  g.span_ns = g.span.end_ns - g.span.start_ns;
  if (g.span_ns <= 0) return g;
  // The list is kept from the start of the run: it covers the span when
  // nothing was dropped, or when its last pause is past the span's end.
  const bool covered = run.gc.dropped == 0 || (!run.gc_pauses.empty() && run.gc_pauses.back().start_ns >= g.span.end_ns);
  if (covered) {
    for (const GcPause& p : run.gc_pauses) {
      // The part of each pause inside the span.
      const int64_t a = std::max(p.start_ns, g.span.start_ns), b = std::min(p.end_ns, g.span.end_ns);
      if (b <= a) continue;
      ++g.collections;
      g.pause_ns += b - a;
      g.max_ns = std::max(g.max_ns, p.duration());
      ++g.by_generation[p.generation];
      g.ns_by_generation[p.generation] += b - a;
    }
  } else {
    // Beyond the list: the run's totals, scaled from its wall time to the span.
    g.estimated = true;
    const double wall_ns = run.run.wall_s * 1e9;
    const double k = wall_ns > 0 ? std::min(1.0, static_cast<double>(g.span_ns) / wall_ns) : 1.0;
    g.collections = static_cast<uint64_t>(static_cast<double>(run.gc.collections) * k);
    g.pause_ns = static_cast<int64_t>(static_cast<double>(run.gc.total_ns) * k);
    g.max_ns = run.gc.max_ns;
    for (int i = 0; i < GcTotals::kGenerations; ++i) {
      g.by_generation[i] = static_cast<uint64_t>(static_cast<double>(run.gc.by_generation[i]) * k);
      g.ns_by_generation[i] = static_cast<int64_t>(static_cast<double>(run.gc.ns_by_generation[i]) * k);
    }
  }
  g.share = static_cast<double>(g.pause_ns) / static_cast<double>(g.span_ns);
  return g;
}

}  // namespace torchneck
