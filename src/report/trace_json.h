// trace.json: the run as a timeline in the Chrome Trace Event Format (JSON
// object form), for https://ui.perfetto.dev or chrome://tracing.
//
// What it holds (docs/trace-json.md): a "Steps" track with each step and its
// phases (data wait, forward, backward, optimizer: the segments the step
// breakdown sums, analyze/steps.h); per thread, the operators, backward
// nodes, user scopes and nn.Module scopes; per thread a second track with
// the Python frames (trace mode) or the sampled stacks (sample mode);
// forward→backward flow arrows; for an analysed Kineto trace, one process
// per GPU with a track per stream (kernels, memcpy, memset) and CPU→GPU
// launch arrows; the resident memory as a counter track ("C" events) and
// the garbage collections as slices of their own track (cat "gc"). DataLoader
// worker processes are named.
//
// Size is bounded: only a window of steps is written (the first step and
// the following ones up to the N-th steady step), and at most max_events
// slices in all; otherData.left_out says what was left out and why.
// Slices on one track always nest (a partial overlap is clamped to its
// parent's end and counted), so every viewer draws the same picture.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/analysis.h"
#include "model/run.h"

namespace torchneck {

constexpr int64_t kDefaultTraceSteps = 5;

struct TraceJsonOptions {
  // Steady steps in the window (warm-up steps before them come along, at
  // most as many again); 0: every step of the timeline.
  int64_t steps = kDefaultTraceSteps;
  // Slices written at most; past it, the least important go first (Python
  // frames and samples, then GPU work, then the deepest operators).
  size_t max_events = 250000;
  // Names longer than this are cut (some C++ kernel names run to kilobytes).
  size_t max_name_chars = 300;
  // The main process's id when the Run does not say (no worker processes);
  // 0: unknown (then 1).
  int64_t pid = 0;
  // One rank of several in one file (ranks_trace_json): ts 0 is this time
  // on the run's clock (INT64_MIN: its first slice); every pid is moved by
  // pid_offset (a trace's GPU pids are its device numbers, the same on every
  // rank); its processes are named and sorted under `label`; and only the
  // events are written, for the caller to put in its own file.
  int64_t base_ns = INT64_MIN;
  int64_t pid_offset = 0;
  std::string label;
  int64_t sort_offset = 0;
  bool fragment = false;
};

// Several ranks of one job on one time axis, each rank's processes (its
// main process, DataLoader workers, GPUs) under "rank K": RUNS[i] with
// its ANALYSES[i].steps, shifted by OFFSETS_NS[i] (analyze/cross_rank.h,
// RankAnalysis::clock_offset_ns); OPTIONS as for one run, its max_events
// shared between the ranks.
struct RankTrace {
  const Run* run = nullptr;
  const Analysis* analysis = nullptr;
  int64_t offset_ns = 0;
};
void ranks_trace_json(const std::vector<RankTrace>& ranks, const std::string& clock, const TraceJsonOptions& options,
                      const std::function<void(std::string_view)>& sink);

// Of `analysis` only `steps` is read (the pipeline writes trace.json while a
// trace's GPU reports are still being made). A run
// with activities (Run::activities, from a Kineto trace) gets their GPU
// tracks and CUDA runtime calls, and its threads their trace's processes.
std::string trace_json(const Run& run, const Analysis& analysis, const TraceJsonOptions& options);
// The same, handed to `sink` in pieces of about 256 KB as it is written, so a
// large trace is never whole in memory.
void trace_json(const Run& run, const Analysis& analysis, const TraceJsonOptions& options,
                const std::function<void(std::string_view)>& sink);

}  // namespace torchneck
