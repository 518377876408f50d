#include "analyze/nvml.h"

#include <algorithm>

namespace torchneck {
namespace {

// A mean of the values that are there (>= 0).
struct Mean {
  double sum = 0;
  size_t n = 0;
  void add(int64_t v) {
    if (v < 0) return;
    sum += static_cast<double>(v);
    ++n;
  }
  double value() const { return n > 0 ? sum / static_cast<double>(n) : -1; }
};

template <typename T>
void peak(T& p, T v) {
  if (v >= 0 && v > p) p = v;
}

}  // namespace

NvmlAnalysis analyze_nvml(const Run& run, const StepAnalysis& steps) {
  NvmlAnalysis a;
  a.sampled = !run.nvml.empty();
  a.interval_ns = run.nvml_interval_ns;
  a.span = steady_span(steps);
  a.devices.resize(run.nvml_devices.size());
  std::vector<Mean> util(a.devices.size()), mem(a.devices.size()), power(a.devices.size()),
      steady(a.devices.size());
  for (const NvmlSample& s : run.nvml) {
    if (s.device >= a.devices.size()) continue;
    NvmlDeviceSummary& d = a.devices[s.device];
    ++d.samples;
    util[s.device].add(s.gpu_util_pct);
    mem[s.device].add(s.mem_util_pct);
    power[s.device].add(s.power_mw);
    peak(d.gpu_util_peak, s.gpu_util_pct);
    peak(d.mem_used_peak, s.mem_used_bytes);
    peak(d.power_peak_mw, s.power_mw);
    peak(d.sm_clock_max, s.sm_clock_mhz);
    if (s.sm_clock_mhz >= 0 && (d.sm_clock_min < 0 || s.sm_clock_mhz < d.sm_clock_min)) d.sm_clock_min = s.sm_clock_mhz;
    if (a.span.found && s.t_ns >= a.span.start_ns && s.t_ns <= a.span.end_ns) {
      ++d.steady_samples;
      steady[s.device].add(s.gpu_util_pct);
    }
  }
  for (size_t i = 0; i < a.devices.size(); ++i) {
    NvmlDeviceSummary& d = a.devices[i];
    d.gpu_util_mean = util[i].value();
    d.mem_util_mean = mem[i].value();
    d.power_mean_mw = power[i].value();
    d.gpu_util_steady_mean = steady[i].value();
    d.mem_total = run.nvml_devices[i].mem_total_bytes;
  }
  return a;
}

}  // namespace torchneck
