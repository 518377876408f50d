// A live run's GPU window (model/run.h, GpuWindow): its Kineto activities,
// already on the live run's clock, against the live run's own timeline.
#pragma once

#include <string>
#include <vector>

#include "analyze/gpu/gpu_report.h"
#include "analyze/layers.h"
#include "analyze/steps.h"
#include "model/activity.h"
#include "model/run.h"

namespace torchneck::gpu {

// Every runtime or driver call of the window that launched device work
// (kernels, memcpy, memset, matched by correlation id), as the live run's
// thread (by Linux thread id) and the call's start, with the device time of
// the work it launched. Calls on a thread the live run does not know are
// left out.
std::vector<GpuLaunch> gpu_launches(const Run& live, const Activities& window);

// How Kineto's CPU operators of the window line up with the same
// operators on the live run's timeline (both record every aten op): a line,
// live = kineto + correction_ns + stretch * (kineto - origin_ns), fitted to
// the matches, not only an offset. Kineto's times come from the TSC through
// a conversion torch fits at the profiler's start and stop; on a VM a
// reading preempted between its two clocks skews that fit, and the whole
// window comes out stretched (docs/coexistence.md). The matches are tracked in time order, in bins, each
// bin matched by the line fitted to the bins before it (each Kineto cpu_op
// to the live event of its name on its thread that starts nearest to where
// the line puts it), so that a stretch larger than an operator's spacing
// does not match it to its neighbour; the line is kept only where it leaves
// less than the offset alone. `residual_ns`: the median distance left.
// matched == 0: nothing to compare (no operator in both), and the clocks'
// offset stands alone.
struct Alignment {
  size_t matched = 0;
  int64_t origin_ns = 0;      // the first matched operator's Kineto time
  int64_t correction_ns = 0;  // added at origin_ns
  double stretch = 0.0;       // added per ns past origin_ns (0: an offset alone)
  int64_t residual_ns = 0;
};
// At most `max_ops` Kineto operators are matched (the first ones).
Alignment align_window(const Run& live, const Activities& window, size_t max_ops = 20000);
// Stretches above this are no clock's error: the matches are not the same
// operators, and the offset alone is kept.
inline constexpr double kMaxClockStretch = 0.05;

// Moves every activity of `a` onto the live run's clock by `al` (start and
// end through the line: a duration is stretched with its clock). Device
// work and runtime calls too, fitted on the operators only: this takes
// CUPTI's timestamps through the same conversion as torch's (Kineto's
// register_time_converter); not verified on a GPU, where a stretch of the
// operators alone would show as launches outside their operators.
void align_activities(Activities& a, const Alignment& al);

// Where in the script the window's synchronising calls came from: the
// Python sampler's stack on the call's thread nearest to it in time (within
// kSyncSampleReachNs), its innermost frame outside torch, the standard
// library and torchneck. Sample mode only (the sampler's timeline); by the
// calls' time, descending.
inline constexpr int64_t kSyncSampleReachNs = 10'000'000;  // two periods of the 200 Hz sampler
std::vector<SyncSite> sync_sites(const Run& live, const Activities& window);

// Busy and idle device time of each step of the window (the steps whose
// gpu_window flag is set), from the device work's union over all devices
// and streams, and the main thread's DataLoader fetches.
std::vector<WindowStepGpu> window_step_gpu(const Run& live, const StepAnalysis& steps, const Activities& window);

// Moves every activity of `a` by `offset_ns` (Kineto's clock to the live
// run's: GpuWindow::clock_offset_ns plus the trace's base time).
void shift_activities(Activities& a, int64_t offset_ns);

}  // namespace torchneck::gpu
