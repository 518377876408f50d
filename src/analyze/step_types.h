// The step analysis's types: steps, their phases and breakdowns, slow
// steps, and the intervals a step's time is split among. The driver that
// computes them is steps.h; its parts (light_steps.h, slow_steps.h,
// detail_cost.h) read and fill these types and include only this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analyze/run_clocks.h"
#include "model/run.h"

namespace torchneck {

// Where a step's time goes. Every instant belongs to one phase, by priority
// (steps.cc, kTier): evaluation > data > backward > forward (module calls)
// > optimizer > forward (operators outside module calls) > other.
enum class Phase : int { kData = 0, kOptimizer, kBackward, kForward, kEvaluation, kOther };
constexpr int kNumPhases = 6;
const char* phase_name(Phase p);  // "data", "optimizer", ..., "evaluation", "other"

struct StepBreakdown {
  int64_t ns[kNumPhases] = {0, 0, 0, 0, 0, 0};
  int64_t total() const;
  int64_t operator[](Phase p) const { return ns[static_cast<int>(p)]; }
  // Forward + backward + optimizer: the work a faster model would shrink.
  int64_t compute() const { return (*this)[Phase::kForward] + (*this)[Phase::kBackward] + (*this)[Phase::kOptimizer]; }
};

// A step after warm-up is typical, or slow (> kSlowFactor x the typical
// step); a slow one is explained by what made it slow (slow_steps.h).
enum class SlowKind : uint8_t { kNone, kPeriodic, kEvaluation, kOneOff };
const char* slow_kind_name(SlowKind k);  // "", "periodic", "evaluation", "one-off"

struct Step {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  StepBreakdown breakdown;  // sums to end_ns - start_ns
  // false: warm-up (the first step, a slow start, a step that compiled),
  // the only steps left out of the statistics. Slow steps stay in: they are
  // time the user pays.
  bool steady = true;
  bool gpu_window = false;  // not steady because the GPU window's profiler ran in it (run.h, GpuWindow)
  // Inside a detail window (Run::detail_spans): its operators, backward
  // nodes and module calls were recorded. A step outside them has its
  // data and optimizer time measured and the rest of its breakdown
  // estimated from the detailed steps (`estimated`; docs/overhead.md).
  bool detailed = true;
  bool estimated = false;
  // Not steady because its detail window measured costly against the
  // undetailed steps around it (detail_cost.h): its time carries the
  // detail's cost, which theirs does not. Its breakdown still serves the
  // estimate of theirs.
  bool detail_excluded = false;
  // detail_excluded: its window's cost as measured, a share of the
  // undetailed time: its time less that (undetailed_ns) is what the slow
  // steps and step_time_drift's trend read.
  double detail_cost = 0;
  int64_t undetailed_ns() const {
    return detail_excluded ? static_cast<int64_t>(static_cast<double>(duration()) / (1.0 + detail_cost)) : duration();
  }
  SlowKind slow = SlowKind::kNone;  // steady and detail_excluded steps only (slow_steps.h)
  uint64_t ops = 0;         // operator events on the main thread in the step, outside evaluation
  int64_t op_self_ns = 0;   // their self time
  int micro_batches = 0;    // backward passes in the step outside optimizer.step (accumulation, several losses)
  // The launcher's own work in the step's "other" time (the graph watch's
  // looks at steps 2, 4, 8, ...). It stays in "other", and out of the split
  // the undetailed steps are estimated by: a look in a detail window would
  // otherwise pass for the script's time between operators in every step
  // estimated from it.
  int64_t tool_ns = 0;
  int64_t duration() const { return end_ns - start_ns; }
};

// Slow steps of one kind, and what their extra time was spent on.
struct SlowGroup {
  SlowKind kind = SlowKind::kNone;
  std::vector<size_t> steps;  // indices into StepAnalysis::steps
  int period = 0;             // periodic: every `period`-th step ...
  size_t first = 0;           // ... from this one on
  int64_t excess_ns = 0;      // their time beyond a typical step each, summed
  double share = 0;           // excess_ns over over_ns
  // The time the share is of: the steady steps', and the costly detail
  // windows' at their undetailed time (their slow steps count too).
  int64_t over_ns = 0;
  Phase phase = Phase::kOther;  // the phase that grew most in them
  int64_t phase_slow_ns = 0;    // that phase, mean per slow step ...
  int64_t phase_typical_ns = 0; // ... and per typical step
  // The Python function that runs in these steps and hardly in the others
  // (sample mode): "save_checkpoint (train.py:40) -> save (torch/serialization.py:376)".
  std::string what;
};

// The operators the training loop issues itself: top-level ones, not inside
// another operator (aten::linear, not the t and addmm it calls), over the
// detailed steps that are steady or detail_excluded; evaluation passes and
// DataLoader fetches left out. framework_overhead reads them.
struct TopLevelOps {
  double per_step = 0;             // mean count a step
  double ns_per_step = 0;          // their time a step, nested operators included
  double small_per_step = 0;       // of them, the small ones (kSmallCallNs, top_level_ops.h) ...
  double small_ns_per_step = 0;    // ... and their time
  double compute_ns_per_step = 0;  // the same steps' forward + backward + optimizer
  // The most called, with their calls a step (kMostCalledTopLevelOps at most).
  std::vector<std::pair<std::string, double>> most_called;
};

// A root module's calls without backward that are forward work of the
// training steps (loop_spans.h's evaluation_passes), shown by name: a
// frozen network (a loss network, a teacher), or the model being trained
// called without backward in nearly every step (a GAN's generator).
struct FrozenForward {
  std::string name;         // the root module's (ModuleInfo::name)
  bool trained = false;     // the loop trains it in other calls
  // In the steps after warm-up whose module calls were recorded (detail
  // windows': at the detail's cost), and its calls' time over those steps.
  uint64_t calls = 0;
  int64_t ns_per_step = 0;
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
  // Where `count` came from when it is not `source`: "optimizer" when the
  // window filled before any optimizer step ended in it (its steps are then
  // bounded by `source`, the run's counted by Optimizer.step calls).
  std::string count_source;
  // With count_source: the mean time of a counted step inside its scopes
  // (the Optimizer.step# aggregates over the whole run, over `count`):
  // LBFGS's step with every closure in it, where the window's steps are
  // single closures' backward spans. 0 otherwise.
  int64_t counted_step_ns = 0;
  size_t excluded = 0;     // warm-up steps, and the GPU window's
  size_t gpu_window_steps = 0;  // of them, the GPU window's
  size_t steady_count = 0; // the steps the statistics are over
  // Detail windows (Run::detail_mode "window"): the steady steps inside
  // them, which ops_per_step, op_self_ns_per_step, micro_batches_per_step
  // and the estimate of the other steps' breakdown are over; and how many
  // steps had their breakdown estimated.
  std::string detail_mode;
  size_t detailed_steady = 0;  // the detailed steps the estimate is from (steady or detail_excluded)
  size_t estimated_steps = 0;
  size_t detail_excluded = 0;  // detailed steps left out of the time statistics (Step::detail_excluded)
  // Where the run's time went: the steady steps' time, all of it, divided
  // by their number (a time-weighted mean: slow steps count with their
  // whole time, as the user pays it); `breakdown` sums exactly to step_ns.
  int64_t step_ns = 0;
  StepBreakdown breakdown;
  int64_t steady_ns = 0;   // the steady steps' time, summed
  double step_cv = 0;      // their spread: standard deviation / mean
  // How well step_ns is known: its relative standard error, stratified by
  // kind of step (typical, periodic, evaluation, one-off: slow_steps.h).
  double mean_error = 0;
  int64_t median_ns = 0;   // median steady step
  int64_t typical_ns = 0;  // median of the steady steps that are not slow
  std::vector<SlowGroup> slow;  // periodic, evaluation, one-off (slow_steps.h)
  // Evaluation passes (loop_spans.h), over every step in the window, and
  // their time (in steps' evaluation phase).
  std::vector<std::pair<int64_t, int64_t>> evaluation;
  int64_t evaluation_ns = 0;
  std::vector<FrozenForward> frozen;  // most time first
  int64_t window_ns = 0;   // all steps' time in the window, warm-up included
  double micro_batches_per_step = 0;  // median backward passes per steady step
  double ops_per_step = 0;     // steady-state mean, evaluation and data fetches left out
  double op_self_ns_per_step = 0;
  TopLevelOps top_level_ops;
  bool timeline_truncated = false;  // events were dropped: later steps unseen
  // Where the timeline was cut before the run's end: the whole run's steps
  // by the step clocks, those after the timeline's last step apart
  // (run_clocks.h); empty otherwise.
  RunClocks whole_run;
};

// The pieces each step's breakdown is made of, for timelines (trace.json):
// maximal runs of one phase inside one step, in time order, "other" left
// out. Per step, the segments of a phase sum to its breakdown.ns[phase].
struct PhaseSegment {
  size_t step;  // index into StepAnalysis::steps
  int64_t start_ns;
  int64_t end_ns;
  Phase phase;
};

// A labelled interval of a step (attribute_phases, steps.h). `loose`: a
// forward operator outside any module call, below the optimizer (an
// optimizer's own operators are forward-labelled; module calls inside
// optimizer.step, as LBFGS's closure makes, are forward and backward).
struct PhaseInterval {
  int64_t start_ns;
  int64_t end_ns;
  Phase phase;
  bool loose = false;
  // Also seen outside detail windows (a user scope: a DataLoader fetch,
  // optimizer.step): what a step outside them is swept from.
  bool light = false;
  // Seen only by the light sweep (what the light events alone would give),
  // not by the breakdown itself.
  bool light_only = false;
  // The launcher's own work (TimelineView::is_tool_scope): no phase of its
  // own; where it falls in "other" it is counted in Step::tool_ns.
  bool tool = false;
};

}  // namespace torchneck
