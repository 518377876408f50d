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
// operators on the live run's timeline (both record every aten op): each
// Kineto cpu_op is matched to the live event of its name on its thread
// that starts nearest to it. `correction_ns` (the median of live - Kineto
// over the matches) is what to add to the window's times; `residual_ns`
// the median distance left after it. matched == 0: nothing to compare (no
// operator in both), and the clocks' offset stands alone.
struct Alignment {
  size_t matched = 0;
  int64_t correction_ns = 0;
  int64_t residual_ns = 0;
};
// At most `max_ops` Kineto operators are matched (the first ones).
Alignment align_window(const Run& live, const Activities& window, size_t max_ops = 20000);

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
