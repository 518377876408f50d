// The whole run's steps by the step clocks (Run::step_clocks), where the
// timeline holds only its first part. The timeline is bounded
// (--timeline-events, --timeline-steps); a long run's later steps leave no
// events in it, so the step statistics and every detector that reads steps
// describe its first part only. The clocks are the step-ending thread's at
// each of its step boundaries, thinned to every 2nd, 4th, ... boundary as
// the run grows but never full: two of them give the steps between them
// (their boundary counts), their mean time and their mean data wait
// (cumulative fetch time), anywhere in the run, to its last step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/run.h"

namespace torchneck {

// The `steps` steps between two consecutive kept clocks.
struct ClockInterval {
  uint64_t steps = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  double step_ns = 0;  // their mean step
};

struct RunClocks {
  // Step boundaries a step has (k optimizers stepping per iteration: k).
  uint64_t boundaries_per_step = 1;
  // From the end of the clocks' first step to the end of the run's last:
  // steps first_step+1 .. last_step.
  uint64_t first_step = 0;
  uint64_t last_step = 0;
  double step_ns = 0;
  double data_ns = 0;
  double cpu_ns = -1;  // the thread's CPU time per step, -1 unknown
  // The steps after the timeline's last one (from the first clock at or
  // after its end): beyond_first_step+1 .. last_step. 0 steps: the timeline
  // holds the whole run, and nothing here is reported.
  uint64_t beyond_first_step = 0;
  uint64_t beyond_steps = 0;
  double beyond_step_ns = 0;
  double beyond_data_ns = 0;
  // Every interval between consecutive kept clocks, by time: equal in
  // steps (the thinning's stride) but for the last.
  std::vector<ClockInterval> intervals;
  bool empty() const { return beyond_steps == 0; }
};

// The clocks of the thread that ended the most steps, read against the
// run's step count (`steps_in_run`, from the aggregates where the timeline
// was cut) and the end of the timeline's last step. Empty where the clocks
// do not reach beyond it, or do not agree with the count (boundaries on
// several threads, a step count not from step boundaries).
RunClocks run_clocks(const Run& run, size_t steps_in_run, int64_t timeline_end_ns);

}  // namespace torchneck
