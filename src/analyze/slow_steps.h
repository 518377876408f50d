// Slow steps explained, not discarded: after warm-up, a step slower than
// kSlowFactor x the run's fast steps is slow, and slow steps are grouped by
// what made them slow: an evaluation pass inside them, a period (every k-th
// step: a loader's burst of k workers, gradient accumulation's k-th
// micro-batch, a checkpoint or log line every k steps), or neither (one-off:
// a garbage collection, a hiccup of the machine). Each group carries its
// share of the run and what its extra time went to.
#pragma once

#include "analyze/step_types.h"
#include "model/run.h"

namespace torchneck {

// Fills a.slow, a.typical_ns and Step::slow from a's steady steps.
void classify_slow_steps(const Run& run, StepAnalysis& a);

}  // namespace torchneck
