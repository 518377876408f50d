// GPU findings of an analysed Kineto trace, in the findings format of a live
// run. Thresholds are named; each finding says the numbers it rests on.
#include <algorithm>
#include <cstdio>

#include "analyze/gpu/gpu_report.h"
#include "core/timing.h"
#include "analyze/summary.h"

namespace torchneck::gpu {
namespace {

// The TensorBoard plugin recommends more DataLoader workers above 5 % of the
// step (run_generator.py); a quarter of the step makes it the main issue.
constexpr double kDataLoaderShare = 0.05;
constexpr double kDataLoaderHighShare = 0.25;
// GPU busy less than this share of the steps: the GPU waits for the host.
constexpr double kLowUtilization = 0.60;
constexpr double kSyncShare = 0.05;
// Launch-bound: most kernels shorter than kShortKernelNs, and the GPU idle.
constexpr double kShortKernelFraction = 0.50;
// ...and kernels start right after their launch: no queue of work ahead of
// them, so the CPU's launch rate sets the pace (a long delay means the GPU
// had work queued, and launches are not the limit).
constexpr int64_t kStarvedLaunchDelayNs = 50'000;
constexpr double kCommunicationShare = 0.20;
constexpr double kPageableShare = 0.01;
// Peak memory this close to the device's: the next larger batch or model
// runs out of memory, and the caching allocator may already thrash.
constexpr double kMemoryPressure = 0.90;

double avg(const TbOverview& tb, TbRole r) { return tb.avg_ns[static_cast<int>(r)]; }

std::string pct(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", 100.0 * f);
  return buf;
}

std::string us(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", ns / 1e6);
  return buf;
}

}  // namespace

void detect_gpu(const GpuReport& r, std::vector<Finding>& out) {
  const TbOverview& tb = r.tb;
  const double step = tb.avg_total_ns;
  const GpuFacts& g = r.facts;
  const double util = r.metrics.devices.empty() ? -1 : r.metrics.devices.front().utilization;

  if (step > 0) {
    const double data = avg(tb, TbRole::kDataLoader);
    const double share_data = data / step;
    if (share_data >= kDataLoaderShare) {
      Finding f;
      f.id = "input_bound";
      f.severity = share_data >= kDataLoaderHighShare ? "high" : "medium";
      f.title = "Input-bound: the GPU waits for data " + pct(share_data) + " of each step";
      f.evidence.push_back("mean step " + us(step) + ", of which " + us(data) + " in DataLoader (" + pct(share_data) +
                           "), over " + std::to_string(tb.steps.size()) + " ProfilerSteps (the TensorBoard plugin's breakdown)");
      if (util >= 0) f.evidence.push_back("GPU utilization " + pct(util) + " over the steps");
      f.recommendation =
          "DataLoader(..., num_workers=4 or more, pin_memory=True, persistent_workers=True): load the next "
          "batches in worker processes while the GPU computes";
      // Workers overlap loading with the rest of the step: at best the step
      // loses the whole DataLoader time.
      f.estimated_gain_pct = 100.0 * share_data;
      f.gain_arithmetic = "step " + us(step) + " - DataLoader " + us(data) + " (overlapped by workers) = " +
                          us(step - data) + " (upper bound)";
      out.push_back(std::move(f));
    }
    const double comm = avg(tb, TbRole::kCommunication);
    double hta_comm = 0, hta_overlap = 0;  // shares of GPU busy time, HTA's kernel-type breakdown
    for (const auto& k : r.hta.kernel_types) {
      if (k.kernel_type == "COMMUNICATION") hta_comm += k.percentage / 100.0;
      else if (k.kernel_type.find("COMMUNICATION") != std::string::npos) hta_overlap += k.percentage / 100.0;
    }
    if (comm / step >= kCommunicationShare || hta_comm >= kCommunicationShare) {
      Finding f;
      f.id = "communication_bound";
      f.severity = "medium";
      f.title = "Communication takes " + pct(std::max(comm / step, hta_comm)) + " of the GPU's time";
      f.evidence.push_back("mean step " + us(step) + ", of which " + us(comm) + " in communication not hidden behind kernels");
      if (hta_comm + hta_overlap > 0)
        f.evidence.push_back("of GPU busy time: communication alone " + pct(hta_comm) + ", communication overlapping other kernels " +
                             pct(hta_overlap) + " (HTA's kernel-type breakdown)");
      f.recommendation = "Overlap communication with backward (DDP bucket_cap_mb, gradient_as_bucket_view=True), "
                         "accumulate gradients over more micro-batches (no_sync()), or compress gradients";
      f.gain_arithmetic = "not estimated: depends on how much of it the backward pass can hide";
      out.push_back(std::move(f));
    }
  }
  if (util >= 0 && util < kLowUtilization) {
    Finding f;
    f.id = "gpu_idle";
    f.severity = "medium";
    f.title = "The GPU is idle " + pct(1 - util) + " of the steps";
    f.evidence.push_back("GPU utilization " + pct(util) + " (kernel busy time / step span, the TensorBoard plugin's definition)");
    if (step > 0) {
      const double host = avg(tb, TbRole::kDataLoader) + avg(tb, TbRole::kCpuExec) + avg(tb, TbRole::kOther);
      f.evidence.push_back("per step, the host side without device work: DataLoader " + us(avg(tb, TbRole::kDataLoader)) +
                           ", CPU exec " + us(avg(tb, TbRole::kCpuExec)) + ", other " + us(avg(tb, TbRole::kOther)) +
                           " (" + pct(host / step) + ")");
    }
    int64_t host = 0, kernel = 0, other = 0;
    for (const auto& st : r.hta.idle) {
      host += st.host_wait_us;
      kernel += st.kernel_wait_us;
      other += st.other_us;
    }
    const int64_t idle = host + kernel + other;
    if (idle > 0)
      f.evidence.push_back("idle time by cause (HTA's idle-time breakdown, all streams): waiting for the host to launch " +
                           pct(static_cast<double>(host) / idle) + ", between back-to-back kernels " +
                           pct(static_cast<double>(kernel) / idle) + ", other " + pct(static_cast<double>(other) / idle));
    f.recommendation = "Keep the GPU fed: see the findings on data loading, synchronisation and launches; a larger "
                       "batch gives the GPU more work per launch";
    f.gain_arithmetic = "not estimated: the idle time is the sum of its causes, which the other findings estimate";
    out.push_back(std::move(f));
  }
  if (g.span_ns > 0 && static_cast<double>(g.sync_ns) / static_cast<double>(g.span_ns) >= kSyncShare &&
      !g.syncs.empty()) {
    const double s = static_cast<double>(g.sync_ns) / static_cast<double>(g.span_ns);
    Finding f;
    f.id = "host_sync";
    f.severity = s >= 0.20 ? "high" : "medium";
    f.title = "The CPU waits on the GPU (synchronisation) " + pct(s) + " of the trace";
    for (size_t i = 0; i < g.syncs.size() && i < 3; ++i)
      f.evidence.push_back(g.syncs[i].what + " x" + std::to_string(g.syncs[i].calls) + " from " + g.syncs[i].context +
                           ": " + us(static_cast<double>(g.syncs[i].total_ns)));
    f.recommendation = "Remove synchronisation from the training loop: no .item(), .cpu(), print(tensor) or "
                       "torch.cuda.synchronize() per step (accumulate losses on the GPU, read them every N steps)";
    f.estimated_gain_pct = 100.0 * s;
    f.gain_arithmetic = "blocked time " + us(static_cast<double>(g.sync_ns)) + " of " + us(static_cast<double>(g.span_ns)) +
                        " (upper bound: the GPU work it waited for remains)";
    out.push_back(std::move(f));
  }
  if (g.kernels > 0 && static_cast<double>(g.short_kernels) / static_cast<double>(g.kernels) >= kShortKernelFraction &&
      util >= 0 && util < kLowUtilization && g.median_launch_delay_ns < kStarvedLaunchDelayNs) {
    Finding f;
    f.id = "launch_bound";
    f.severity = "medium";
    f.title = "Launch-bound: " + pct(static_cast<double>(g.short_kernels) / static_cast<double>(g.kernels)) +
              " of the kernels run under 10 us while the GPU idles";
    f.evidence.push_back(std::to_string(g.kernels) + " kernels, mean " +
                         us(static_cast<double>(g.kernel_ns) / static_cast<double>(g.kernels)) + "; " +
                         std::to_string(g.launches) + " launch calls took " + us(static_cast<double>(g.launch_api_ns)) +
                         " of CPU time");
    f.evidence.push_back("median launch-to-start delay " + us(static_cast<double>(g.median_launch_delay_ns)) + ", p99 " +
                         us(static_cast<double>(g.p99_launch_delay_ns)));
    f.recommendation = "Fewer, larger kernels: torch.compile(model, mode=\"reduce-overhead\") (CUDA graphs), fused "
                       "optimizers (foreach=True / fused=True), a larger batch";
    f.gain_arithmetic = "not estimated: depends on how many launches fusion removes";
    out.push_back(std::move(f));
  }
  // NVIDIA only: the tensor-core kernel names are NVIDIA's, and an AMD
  // device's computeMajor is not a CUDA compute capability.
  const bool nvidia = g.device_name.find("AMD") == std::string::npos &&
                      g.device_name.find("Radeon") == std::string::npos &&
                      g.device_name.find("Instinct") == std::string::npos;
  if (nvidia && g.compute_major >= 7 && g.kernels > 0 && !g.any_tensor_cores) {
    Finding f;
    f.id = "no_mixed_precision";
    f.severity = "medium";
    f.title = "No kernel uses the tensor cores of the " + (g.device_name.empty() ? std::string("GPU") : g.device_name);
    f.evidence.push_back("compute capability " + std::to_string(g.compute_major) + ".x has tensor cores; none of the " +
                         std::to_string(g.kernels) + " kernels is a tensor-core kernel (by name, the TensorBoard plugin's list)");
    if (!g.top_kernels.empty())
      f.evidence.push_back("heaviest kernel: " + g.top_kernels.front().name.substr(0, 80) + " (" +
                           pct(g.top_kernels.front().share) + " of kernel time)");
    f.recommendation = "Mixed precision: with torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16) (or float16 "
                       "with torch.cuda.amp.GradScaler) around forward and loss; or torch.backends.cuda.matmul."
                       "allow_tf32 = True on Ampere and later";
    f.gain_arithmetic = "not estimated: tensor cores speed up matrix multiplies and convolutions, not the rest";
    out.push_back(std::move(f));
  }
  const int64_t peak = std::max(g.peak_allocated, g.peak_reserved);
  if (g.device_memory > 0 && peak >= 0 && static_cast<double>(peak) >= kMemoryPressure * static_cast<double>(g.device_memory)) {
    Finding f;
    f.id = "memory_pressure";
    f.severity = "medium";
    f.title = "Device memory peaks at " + pct(static_cast<double>(peak) / static_cast<double>(g.device_memory)) + " of the GPU's";
    f.evidence.push_back("peak " + std::string(g.peak_reserved >= g.peak_allocated ? "reserved" : "allocated") + " " +
                         std::to_string(peak >> 20) + " MiB of " + std::to_string(g.device_memory >> 20) + " MiB" +
                         (g.peak_is_lower_bound ? " (at least: allocations since the trace started)" : ""));
    f.recommendation = "Make room before scaling up: activation checkpointing (torch.utils.checkpoint), mixed "
                       "precision, a smaller batch with gradient accumulation; set "
                       "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation";
    f.gain_arithmetic = "not estimated: a risk (out of memory, allocator retries), not a cost per step";
    out.push_back(std::move(f));
  }
  if (g.pageable_copies > 0 && g.span_ns > 0 &&
      static_cast<double>(g.pageable_ns) / static_cast<double>(g.span_ns) >= kPageableShare) {
    Finding f;
    f.id = "pageable_memcpy";
    f.severity = "low";
    f.title = "Copies between the GPU and pageable host memory: " + pct(static_cast<double>(g.pageable_ns) / static_cast<double>(g.span_ns)) + " of the trace";
    f.evidence.push_back(std::to_string(g.pageable_copies) + " copies, " + std::to_string(g.pageable_bytes / (1 << 20)) +
                         " MiB, " + us(static_cast<double>(g.pageable_ns)));
    f.recommendation = "Pinned memory: DataLoader(..., pin_memory=True) and tensor.to(\"cuda\", non_blocking=True)";
    f.gain_arithmetic = "not estimated: pinned copies are faster and can overlap compute";
    out.push_back(std::move(f));
  }
}

GpuReport gpu_report(const kineto::Trace& trace) {
  GpuReport r;
  r.path = trace.path;
  r.rank = trace.rank;
  r.hta = hta_breakdowns(trace);
  timing_phase("GPU: HTA breakdowns", 4);
  r.facts = gpu_facts(trace);
  timing_phase("GPU: kernels, syncs, launches", 4);
  TbOverviewAndMetrics tb = tb_overview_and_metrics(trace);
  r.tb = std::move(tb.overview);
  r.metrics = std::move(tb.metrics);
  timing_phase("GPU: TensorBoard plugin's", 4);
  detect_gpu(r, r.findings);
  return r;
}

}  // namespace torchneck::gpu
