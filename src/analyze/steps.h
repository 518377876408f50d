// Training steps and where each step's time goes, from the main thread's
// timeline (DESIGN.md §4: user scopes, backward nodes, module scopes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/run.h"

namespace torchneck {

enum class Phase : int { kData = 0, kOptimizer, kBackward, kForward, kOther };
constexpr int kNumPhases = 5;
const char* phase_name(Phase p);  // "data", "optimizer", ...

struct StepBreakdown {
  int64_t ns[kNumPhases] = {0, 0, 0, 0, 0};
  int64_t total() const;
  int64_t operator[](Phase p) const { return ns[static_cast<int>(p)]; }
  // Forward + backward + optimizer: the work a faster model would shrink.
  int64_t compute() const { return (*this)[Phase::kForward] + (*this)[Phase::kBackward] + (*this)[Phase::kOptimizer]; }
};

struct Step {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  StepBreakdown breakdown;  // sums to end_ns - start_ns
  bool steady = true;       // false: warm-up or outlier, excluded from the median
  uint64_t ops = 0;         // operator events on the main thread in the step
  int64_t op_self_ns = 0;   // their self time
  int64_t duration() const { return end_ns - start_ns; }
};

struct StepAnalysis {
  // Where iterations came from: "profiler_step", "optimizer", "dataloader",
  // "backward" or "whole_run", in that order of preference.
  std::string source;
  std::vector<Step> steps;  // those inside the timeline window
  // Iterations in the whole run: steps.size(), or, when the timeline window
  // filled up, counted from the exact aggregates (optimizer steps, DataLoader
  // fetches) where the source allows.
  size_t count = 0;
  size_t excluded = 0;     // warm-up and outlier steps
  int64_t median_ns = 0;   // median steady step
  // Steady-state breakdown: mean share per phase, scaled to the median step,
  // so the phases sum exactly to median_ns.
  StepBreakdown median;
  double ops_per_step = 0;     // steady-state mean
  double op_self_ns_per_step = 0;
  bool timeline_truncated = false;  // events were dropped: later steps unseen
};

StepAnalysis analyze_steps(const Run& run);

// The pieces each step's breakdown is made of, for timelines (trace.json):
// maximal runs of one phase inside one step, in time order, "other" left
// out. Per step, the segments of a phase sum to its breakdown.ns[phase].
struct PhaseSegment {
  size_t step;  // index into StepAnalysis::steps
  int64_t start_ns;
  int64_t end_ns;
  Phase phase;
};
std::vector<PhaseSegment> phase_segments(const Run& run, const StepAnalysis& analysis);

// Exposed for tests: splits [start, end) among labelled intervals, each
// instant to the highest-priority (lowest Phase value) interval covering it,
// the rest to kOther.
struct PhaseInterval {
  int64_t start_ns;
  int64_t end_ns;
  Phase phase;
};
StepBreakdown attribute_phases(const std::vector<PhaseInterval>& intervals, int64_t start_ns,
                               int64_t end_ns);

}  // namespace torchneck
