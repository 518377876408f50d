#include "pipeline/gpu_window.h"

#include <exception>
#include <string>

#include "analyze/gpu/gpu_report.h"
#include "analyze/gpu/gpu_window.h"
#include "ingest/kineto_json.h"
#include "ingest/kineto_to_run.h"

namespace torchneck {
namespace {

// Fewer operators matched between Kineto's and ours say too little to move
// the window off the clocks' own offset.
constexpr size_t kMinAlignedOps = 10;

}  // namespace

Analysis analyze_with_gpu_window(Run& run, const SummaryOptions& options, RankAnalysis ranks) {
  GpuWindow& w = run.gpu_window;
  if (w.state != GpuWindowState::kRecorded) return analyze(run, options, {}, nullptr, std::move(ranks));
  Run window;
  try {
    kineto::Trace trace = kineto::load_trace(w.trace_path);
    const int64_t offset = trace.base_time_ns + w.clock_offset_ns;
    window = run_of_trace(std::move(trace));
    gpu::shift_activities(window.activities, offset);
  } catch (const std::exception& e) {
    w.state = GpuWindowState::kFailed;
    w.note = std::string("the GPU window's trace could not be read: ") + e.what();
    run.notes.push_back("GPU window: " + w.note);
    return analyze(run, options, {}, nullptr, std::move(ranks));
  }
  // The clocks' offset, refined on the operators both recorded.
  const gpu::Alignment al = gpu::align_window(run, window.activities);
  w.aligned_ops = al.matched;
  if (al.matched >= kMinAlignedOps) {
    w.alignment_correction_ns = al.correction_ns;
    w.alignment_stretch = al.stretch;
    w.alignment_residual_ns = al.residual_ns;
    gpu::align_activities(window.activities, al);
  }
  // CPU activity only (--gpu=on without CUDA): nothing for the GPU
  // analyses to say; the window's line and its steps stand.
  bool device_work = false;
  for (const Activity& e : window.activities.events) device_work = device_work || is_gpu_work(e.cat);
  if (!device_work) return analyze(run, options, {}, nullptr, std::move(ranks));
  std::vector<gpu::GpuReport> reports;
  reports.push_back(gpu::gpu_report(window));
  reports.front().path = w.trace_path;
  reports.front().sync_sites = gpu::sync_sites(run, window.activities);
  const std::vector<GpuLaunch> launches = gpu::gpu_launches(run, window.activities);
  Analysis a = analyze(run, options, std::move(reports), &launches, std::move(ranks));
  a.gpu.front().window_steps = gpu::window_step_gpu(run, a.steps, window.activities);
  return a;
}

}  // namespace torchneck
