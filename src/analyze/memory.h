// Resident memory and garbage collections over the run, against its steps:
// what the memory line of the reports shows and what memory_creep and
// gc_pauses read. Steps are read only through StepAnalysis::steps (start,
// end, steady).
#pragma once

#include <cstddef>
#include <cstdint>

#include "analyze/steps.h"
#include "model/run.h"

namespace torchneck {

// The part of the run after warm-up: from the first steady step's start to
// the last steady step's end (outliers inside it included: memory does not
// care why a step was slow); where the timeline ended before the run did,
// to the run's last step by the step clocks (StepAnalysis::whole_run).
struct SteadySpan {
  bool found = false;
  size_t first = 0, last = 0;  // step indices
  int64_t start_ns = 0, end_ns = 0;
  size_t steps() const { return found ? last - first + 1 : 0; }
};
SteadySpan steady_span(const StepAnalysis& steps);

// A least-squares line y = a + b t over (t, y) points.
struct LineFit {
  size_t points = 0;
  double intercept = 0;  // at t = 0
  double slope = 0;      // per unit of t
  double r2 = 0;         // share of y's variance the line explains (0 when y is constant)
};
LineFit fit_line(const double* t, const double* y, size_t n);

struct MemoryAnalysis {
  bool sampled = false;  // Run::memory has samples
  size_t samples = 0;
  int64_t interval_ns = 0;
  int64_t rss_first = -1;  // first sample of the run
  int64_t rss_last = -1;
  int64_t rss_peak = -1;
  int64_t peak_t_ns = 0;
  // The fit over the samples of the steady span (fitted: enough of them).
  bool fitted = false;
  SteadySpan span;
  size_t fit_samples = 0;
  LineFit fit;                     // bytes over seconds since span.start_ns
  int64_t rss_steady_start = -1;   // the line at the span's start (the sample there when not fitted)
  double growth_bytes = 0;         // the line's rise over the span
  double growth_per_step_bytes = 0;
  // What torchneck's own timelines recorded over the span (operator and
  // module events, Python samples and frames, at their model sizes): memory
  // the profiler itself added, a lower bound of it, left out of the growth
  // memory_creep judges.
  double recorded_bytes = 0;
  // The same fit over the second half of the span only: a leak keeps its
  // slope, an allocator that warms up (arenas, caches filling) flattens.
  LineFit late_fit;
  // torch's CPU allocator (MemorySample::torch_allocated_bytes): the bytes
  // its storages held, counted from the run's start (counted: every sample
  // has the figure). The same line over the same samples of the span: how
  // much of the resident growth is tensors.
  bool torch_counted = false;
  int64_t torch_first = -1, torch_last = -1, torch_peak = -1;
  int64_t torch_steady_start = -1;  // the line at the span's start (fitted) or the sample there
  double torch_growth_bytes = 0;    // the line's rise over the span (fitted)
  double torch_r2 = 0;
};
MemoryAnalysis analyze_memory(const Run& run, const StepAnalysis& steps);

struct GcAnalysis {
  bool observed = false;  // gc.callbacks was watched
  GcTotals totals;        // the whole run
  // Inside the steady span: from the kept pauses when the list covers the
  // span, else estimated from the totals over the run's wall time.
  SteadySpan span;
  bool estimated = false;
  uint64_t collections = 0;
  int64_t pause_ns = 0;
  int64_t max_ns = 0;
  uint64_t by_generation[GcTotals::kGenerations] = {0, 0, 0};
  int64_t ns_by_generation[GcTotals::kGenerations] = {0, 0, 0};
  int64_t span_ns = 0;  // the steady span's length
  double share = 0;     // pause_ns / span_ns
};
GcAnalysis analyze_gc(const Run& run, const StepAnalysis& steps);

}  // namespace torchneck
