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

#include "analyze/steps.h"

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
// sum to 1). A detailed step is atypical in q as a light step is, against
// the detailed steps near it (the same radius), its level scaled by its
// work in the same way.
//   typical[q][p]  the time up to a step's typical level: the median over
//                  the detailed steps typical in q (rows renormalised) of
//                  their own share; a median, so that a stall in one
//                  detailed step (it lands in the gaps between operators,
//                  "other") or a step unlike the rest sets no step's split;
//   excess[q][p]   the time beyond it in an atypical step: the detailed
//                  atypical steps' time beyond their typical split, pooled
//                  (a checkpoint in a window: its time "other", and so is
//                  every later checkpoint's); with none, the typical split:
//                  the same work slower (bursty_loader's forward, 1-15x
//                  while its loader's workers take the cores) and work no
//                  window saw look alike here.
struct LightSplit {
  double typical[kNumPhases][kNumPhases];
  double excess[kNumPhases][kNumPhases];
};

// The split learnt from `used` (indices of detailed steps into joint).
LightSplit learn_light_split(const std::vector<JointPhases>& joint, const std::vector<size_t>& used);

// Each step that is not `detailed` gets its breakdown estimated from its
// light phases (its breakdown as swept, its Step::tool_ns left in "other"
// outside the split) and `split`: in each light phase, the time up to its
// typical level (kLevelRadius) by the typical split, the rest of an
// atypical one by the excess split; "other" takes what the rounding
// leaves, so that the breakdown sums to the step. Marks them estimated.
// A step whose backward holds m times its neighbours' (work_multiple) has
// its typical level scaled by m, and the typical split weighted by m in
// every phase but "other", the loop's own time between the model's calls,
// weighted by the loop bodies it ran (its backward passes, Step::
// micro_batches, counted before this; at most m): twice in a step that ran
// the body twice (grad_scaler's skipped step), once in a step whose one
// backward ran slower (its DataLoader workers took the cores): the loop's
// own time outside its phases does not grow with its work, and splitting
// the extra by the typical shares would give half the slower forward to
// "other".
// Returns how many it estimated.
size_t estimate_light_steps(std::vector<Step>& steps, const LightSplit& split);

}  // namespace torchneck
