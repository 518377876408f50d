// Thresholds that more than one detector reads, or that a finding's CPU and
// GPU detectors both have: named once, side by side, with the reason they
// agree or differ. A detector's own thresholds stay in its file.
#pragma once

namespace torchneck::thresholds {

// input_bound, CPU side (the main thread's wait in DataLoader __next__, of
// the median step): on a CPU-only run, DataLoader workers take cores from
// the step's own computing, so a small wait is not worth them; a quarter of
// the step is. Half of it means the input pipeline, not the model, sets the
// pace.
inline constexpr double kDataWaitShareCpuOnly = 0.25;
inline constexpr double kDataWaitHighShareCpuOnly = 0.50;
// input_bound, GPU side (the TensorBoard plugin's DataLoader share of the
// mean step): on a GPU run the wait is device idle time, and workers load on
// host cores the step barely uses, overlapping kernels; the plugin
// recommends more workers from 5 % (run_generator.py). A quarter of the step
// makes it the main issue.
inline constexpr double kDataWaitShareOnGpu = 0.05;
inline constexpr double kDataWaitHighShareOnGpu = 0.25;

// input_bound and slow_data_transform: below this CPU share of its data
// wait, the main thread mostly waits (sleep, I/O) while loading: workers
// then overlap regardless of cores, and cheaper Python would not help.
inline constexpr double kLoadingWaitsBelowCpu = 0.5;

// gpu_idle and launch_bound: a GPU busy less than this share of the steps
// waits for the host.
inline constexpr double kLowGpuUtilization = 0.60;

}  // namespace torchneck::thresholds

namespace torchneck::thresholds {

// core_contention, and heavy_layer's caution: the main thread runnable but
// waiting for a CPU a tenth of the run (schedstat) is more than this
// machine's background noise (a few %) and enough to skew which layer looks
// heaviest (an activation inflated by the wait).
inline constexpr double kContendedRunqueueShare = 0.10;

}  // namespace torchneck::thresholds
