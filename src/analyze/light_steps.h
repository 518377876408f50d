// The breakdown of the steps outside detail windows (docs/overhead.md,
// "How the light steps' split is learnt"). A light step has only
// its light phases: DataLoader fetches (data), optimizer calls, the
// backward scope, evaluation passes, and the rest ("other"). How the time
// of each light phase divides among the phases with detail (forward is
// inside "other") is learnt from the detailed steps, whose sweep gives
// each instant both its light phase and its phase with detail (JointPhases).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "analyze/step_types.h"

namespace torchneck {

// One step's time by (the phase its light intervals alone give an
// instant, the phase all its intervals give it), row-major
// [light * kNumPhases + full]. The launcher's own work is left out.
using JointPhases = std::array<int64_t, kNumPhases * kNumPhases>;

// A step is atypical in a light phase when that phase takes more than
// this many times its typical level there: twice, as a slow step is twice
// its neighbours (slow_steps.h). A periodic checkpoint (checkpoint_every_k:
// ~40 ms of torch.save in "other" beside ~2 ms) is; a step time that drifts
// (growing_history: ~2 % a step) is not, against its neighbours.
constexpr double kAtypicalFactor = 2.0;
// A light step's typical level in a light phase: the median of that phase
// over the light steps within this many steps of it, itself included. A
// checkpoint every 5 steps is 3 or 4 of those 17; a drift of 2 % a step
// moves the level by ~16 % from one end to the other, far from the factor.
constexpr size_t kLevelRadius = 8;

// How light phase q's time divides among the phases with detail (rows
// sum to 1), learnt from the detailed steps (docs/overhead.md, "How the
// light steps' split is learnt"):
//   typical[q][p]  the time up to a step's typical level: the median over
//                  the detailed steps typical in q of their own share, so
//                  that one stalled or unusual detailed step sets no split;
//   excess[q][p]   the time beyond it in an atypical step: the detailed
//                  atypical steps' excess, pooled; with none, the typical
//                  split.
struct LightSplit {
  double typical[kNumPhases][kNumPhases];
  double excess[kNumPhases][kNumPhases];
};

// The split learnt from `used` (indices of detailed steps into joint).
LightSplit learn_light_split(const std::vector<JointPhases>& joint, const std::vector<size_t>& used);

// Each step that is not `detailed` gets its breakdown estimated from its
// light phases and `split`, and is marked estimated: in each light phase,
// the time up to its typical level (kLevelRadius; scaled by the step's
// work multiple, its backward against its neighbours') by the typical
// split, the rest of an atypical one by the excess split. "other" counts
// once per loop body the step ran (Step::micro_batches), not per work
// multiple; it takes what the rounding leaves, so the breakdown sums to the
// step; the launcher's own time (Step::tool_ns) stays in it, outside the
// split. Returns how many it estimated.
size_t estimate_light_steps(std::vector<Step>& steps, const LightSplit& split);

}  // namespace torchneck
