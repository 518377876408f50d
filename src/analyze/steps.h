// Training steps and where each step's time goes, from the main thread's
// timeline (user scopes, backward nodes, module scopes; docs/architecture.md):
// the driver. Its types are step_types.h; its parts, below it, are
// light_steps.h, slow_steps.h, detail_cost.h, loop_spans.h and run_clocks.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "analyze/step_types.h"
#include "model/run.h"

namespace torchneck {

StepAnalysis analyze_steps(const Run& run);

// The maximal runs of one phase inside each step (PhaseSegment), of the
// first `max_steps` steps only (trace.json's window): the sweep's
// edges over a whole run's operators are ~10 MB, at the end of the run
// when the analysis is already held.
std::vector<PhaseSegment> phase_segments(const Run& run, const StepAnalysis& analysis,
                                         size_t max_steps = SIZE_MAX);

// Exposed for tests: splits [start, end) among labelled intervals, each
// instant to the highest-priority interval covering it (the order in the
// Phase comment, step_types.h), the rest to kOther.
StepBreakdown attribute_phases(const std::vector<PhaseInterval>& intervals, int64_t start_ns,
                               int64_t end_ns);

}  // namespace torchneck
