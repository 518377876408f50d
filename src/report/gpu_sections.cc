#include "report/gpu_sections.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "report/appendf.h"

namespace torchneck {
namespace {

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }
double us(double ns) { return ns / 1e3; }

// The GPU utilisation over time (the Trace view's counter), as [ms since the
// trace's start, busy fraction] pairs; at most kMaxUtilPoints, every k-th
// bucket beyond that, so profile.json stays small on long traces.
constexpr size_t kMaxUtilPoints = 2000;
void write_util_timeline(JsonWriter& w, const gpu::TbDeviceMetrics& d, int64_t origin_ns) {
  const auto& tl = d.util_timeline;
  const size_t every = tl.size() > kMaxUtilPoints ? (tl.size() + kMaxUtilPoints - 1) / kMaxUtilPoints : 1;
  w.field("util_bucket_ms", ms(d.util_bucket_ns * static_cast<int64_t>(every)));
  w.key("util_timeline").begin_array();
  for (size_t i = 0; i < tl.size(); i += every) {
    double busy = 0;  // the mean over the buckets merged into this point
    size_t n = 0;
    for (size_t j = i; j < tl.size() && j < i + every; ++j, ++n) busy += tl[j].second;
    w.begin_array().value(ms(tl[i].first - origin_ns)).value(n ? busy / static_cast<double>(n) : 0.0).end_array();
  }
  w.end_array();
}

}  // namespace

void write_gpu_json(JsonWriter& w, const gpu::GpuReport& r) {
  using gpu::TbRole;
  const gpu::GpuFacts& g = r.facts;
  w.begin_object();
  w.field("trace", r.path);
  w.key("rank");
  r.rank < 0 ? w.null() : w.value(r.rank);
  w.field("device", g.device_name);
  w.field("device_memory_bytes", g.device_memory);
  const gpu::TbDeviceMetrics* m = r.metrics.devices.empty() ? nullptr : &r.metrics.devices.front();
  w.key("utilization");
  m == nullptr ? w.null() : w.value(m->utilization);
  w.key("sm_efficiency");
  (m == nullptr || !m->sm_efficiency) ? w.null() : w.value(*m->sm_efficiency);
  w.key("achieved_occupancy");
  (m == nullptr || !m->achieved_occupancy) ? w.null() : w.value(*m->achieved_occupancy);
  w.key("devices").begin_array();
  for (const auto& d : r.metrics.devices) {
    w.begin_object().field("device", d.device).field("utilization", d.utilization);
    w.key("sm_efficiency");
    d.sm_efficiency ? w.value(*d.sm_efficiency) : w.null();
    w.key("achieved_occupancy");
    d.achieved_occupancy ? w.value(*d.achieved_occupancy) : w.null();
    write_util_timeline(w, d, r.metrics.global_start_ns);
    w.end_object();
  }
  w.end_array();
  // The TensorBoard plugin's per-step breakdown, in microseconds.
  w.key("step_breakdown").begin_array();
  for (const auto& s : r.tb.steps) {
    w.begin_object().field("step", s.name).field("start_us", us(static_cast<double>(s.start_ns)));
    for (int i = 0; i < gpu::kTbRoleCount; ++i) w.field(gpu::tb_role_name(static_cast<TbRole>(i)), s.us(static_cast<TbRole>(i)));
    w.field("total_us", s.total_us());
    w.end_object();
  }
  w.end_array();
  // HTA's breakdowns, with HTA's field names.
  const gpu::TemporalBreakdown& tb = r.hta.temporal;
  w.key("temporal_breakdown").begin_object();
  w.field("rank", tb.rank).field("idle_time_us", tb.idle_time_us).field("compute_time_us", tb.compute_time_us);
  w.field("non_compute_time_us", tb.non_compute_time_us).field("kernel_time_us", tb.kernel_time_us);
  w.field("idle_time_pctg", tb.idle_time_pctg).field("compute_time_pctg", tb.compute_time_pctg);
  w.field("non_compute_time_pctg", tb.non_compute_time_pctg);
  w.end_object();
  w.key("idle_breakdown").begin_array();
  for (const auto& s : r.hta.idle) {
    w.begin_object().field("stream", s.stream);
    w.field("host_wait_us", s.host_wait_us).field("kernel_wait_us", s.kernel_wait_us).field("other_us", s.other_us);
    w.field("host_wait_ratio", s.host_wait_ratio).field("kernel_wait_ratio", s.kernel_wait_ratio).field("other_ratio", s.other_ratio);
    w.end_object();
  }
  w.end_array();
  w.key("kernel_breakdown").begin_array();
  for (const auto& k : r.hta.kernel_types)
    w.begin_object().field("kernel_type", k.kernel_type).field("sum_us", k.sum_us).field("percentage", k.percentage).end_object();
  w.end_array();
  w.key("top_kernels").begin_array();
  for (const auto& k : g.top_kernels) {
    w.begin_object().field("name", k.name).field("calls", k.calls).field("total_us", us(static_cast<double>(k.total_ns)));
    w.field("mean_us", k.calls ? us(static_cast<double>(k.total_ns) / static_cast<double>(k.calls)) : 0.0);
    w.field("share", k.share).field("tensor_cores", k.tensor_cores);
    w.key("grid").begin_array();
    for (int v : k.grid) w.value(v);
    w.end_array();
    w.key("block").begin_array();
    for (int v : k.block) w.value(v);
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.key("launches").begin_object();
  w.field("calls", g.launches).field("api_us", us(static_cast<double>(g.launch_api_ns)));
  w.field("kernels", g.kernels).field("short_kernels", g.short_kernels);
  w.field("median_delay_us", us(static_cast<double>(g.median_launch_delay_ns)));
  w.field("p99_delay_us", us(static_cast<double>(g.p99_launch_delay_ns)));
  w.field("delay_outliers", g.launch_delay_outliers);
  w.end_object();
  w.key("sync_points").begin_array();
  for (const auto& s : g.syncs)
    w.begin_object().field("what", s.what).field("context", s.context).field("calls", s.calls).field("total_us", us(static_cast<double>(s.total_ns))).end_object();
  w.end_array();
  w.key("window_steps").begin_array();  // a live run's window: each step, busy and idle
  for (const auto& st : r.window_steps)
    w.begin_object()
        .field("step", static_cast<uint64_t>(st.step))
        .field("ms", static_cast<double>(st.step_ns) / 1e6)
        .field("busy_ms", static_cast<double>(st.busy_ns) / 1e6)
        .field("idle_data_ms", static_cast<double>(st.idle_data_ns) / 1e6)
        .field("idle_cpu_ms", static_cast<double>(st.idle_cpu_ns) / 1e6)
        .end_object();
  w.end_array();
  w.key("sync_sites").begin_array();  // a live run's window: where in the script
  for (const auto& s : r.sync_sites)
    w.begin_object().field("where", s.where).field("calls", s.calls).field("total_us", us(static_cast<double>(s.total_ns))).end_object();
  w.end_array();
  w.key("memory").begin_object();
  w.key("peak_allocated_bytes");
  g.peak_allocated < 0 ? w.null() : w.value(g.peak_allocated);
  w.key("peak_reserved_bytes");
  g.peak_reserved < 0 ? w.null() : w.value(g.peak_reserved);
  w.field("lower_bound", g.peak_is_lower_bound);
  w.end_object();
  w.key("pageable_memcpy").begin_object();
  w.field("copies", g.pageable_copies).field("bytes", g.pageable_bytes).field("total_us", us(static_cast<double>(g.pageable_ns)));
  w.end_object();
  w.key("gpu_time_by_layer").begin_array();
  for (size_t i = 0; i < g.gpu_time_by_layer.size() && i < 30; ++i) {
    const auto& l = g.gpu_time_by_layer[i];
    w.begin_object().field("module", l.module).field("forward_us", us(static_cast<double>(l.forward_ns)));
    w.field("backward_us", us(static_cast<double>(l.backward_ns))).field("kernels", l.kernels).end_object();
  }
  w.end_array();
  w.key("gpu_time_by_op").begin_array();
  for (size_t i = 0; i < g.gpu_time_by_op.size() && i < 30; ++i) {
    const auto& o = g.gpu_time_by_op[i];
    w.begin_object().field("op", o.op).field("gpu_us", us(static_cast<double>(o.gpu_ns))).field("kernels", o.kernels).end_object();
  }
  w.end_array();
  w.end_object();
}

std::string gpu_terminal_section(const gpu::GpuReport& r, size_t top) {
  using gpu::TbRole;
  const gpu::GpuFacts& g = r.facts;
  std::string out;
  appendf(out, "\nGPU%s: %s, %s GiB\n", r.rank >= 0 ? (" (rank " + std::to_string(r.rank) + ")").c_str() : "",
          g.device_name.empty() ? "(no deviceProperties)" : g.device_name.c_str(),
          g.device_memory > 0 ? std::to_string(g.device_memory >> 30).c_str() : "?");
  // A live run's window: each of its steps, busy and why idle.
  for (const auto& st : r.window_steps) {
    const double n = static_cast<double>(std::max<int64_t>(1, st.step_ns));
    appendf(out, "  step %zu: %.2f ms, GPU busy %.0f %%, idle %.0f %% waiting for data, %.0f %% waiting for the CPU\n",
            st.step + 1, static_cast<double>(st.step_ns) / 1e6, 100.0 * static_cast<double>(st.busy_ns) / n,
            100.0 * static_cast<double>(st.idle_data_ns) / n, 100.0 * static_cast<double>(st.idle_cpu_ns) / n);
  }
  for (const auto& d : r.metrics.devices) {
    appendf(out, "  device %lld: utilization %.1f %%", static_cast<long long>(d.device), 100.0 * d.utilization);
    if (d.sm_efficiency) appendf(out, ", est. SM efficiency %.1f %%", 100.0 * *d.sm_efficiency);
    if (d.achieved_occupancy) appendf(out, ", est. achieved occupancy %.1f %%", *d.achieved_occupancy);
    out += "\n";
  }
  const gpu::TemporalBreakdown& tb = r.hta.temporal;
  if (tb.has_gpu_work) {
    appendf(out, "  Time on the GPU (HTA): idle %.1f %%, compute %.1f %%, non-compute %.1f %% of %.1f ms\n", tb.idle_time_pctg,
            tb.compute_time_pctg, tb.non_compute_time_pctg, static_cast<double>(tb.kernel_time_us) / 1e3);
    for (const auto& s : r.hta.idle)
      if (s.idle_time_us() > 0)
        appendf(out, "    stream %lld idle %.1f ms: host wait %.0f %%, kernel wait %.0f %%, other %.0f %%\n",
                static_cast<long long>(s.stream), static_cast<double>(s.idle_time_us()) / 1e3, 100.0 * s.host_wait_ratio,
                100.0 * s.kernel_wait_ratio, 100.0 * s.other_ratio);
    out += "    kernel types:";
    for (const auto& k : r.hta.kernel_types) appendf(out, " %s %.1f %%;", k.kernel_type.c_str(), k.percentage);
    out += "\n";
  }
  if (!r.tb.steps.empty()) {
    out += "  Step breakdown (the TensorBoard plugin's categories), us:\n    step    ";
    for (int i = 0; i < gpu::kTbRoleCount; ++i) appendf(out, "%12s", gpu::tb_role_name(static_cast<TbRole>(i)));
    out += "       total\n";
    for (const auto& s : r.tb.steps) {
      appendf(out, "    %-8s", s.name.c_str());
      for (int i = 0; i < gpu::kTbRoleCount; ++i) appendf(out, "%12.0f", s.us(static_cast<TbRole>(i)));
      appendf(out, "%12.0f\n", s.total_us());
    }
  }
  if (!g.top_kernels.empty()) {
    appendf(out, "  Kernels, top %zu by total time (%llu kernels, %.1f ms)\n", std::min(top, g.top_kernels.size()),
            static_cast<unsigned long long>(g.kernels), ms(g.kernel_ns));
    out += "      calls   total ms    mean us  share  TC  name\n";
    for (size_t i = 0; i < g.top_kernels.size() && i < top; ++i) {
      const auto& k = g.top_kernels[i];
      appendf(out, "    %7llu %10.2f %10.1f %5.1f%%  %s  %.90s\n", static_cast<unsigned long long>(k.calls), ms(k.total_ns),
              k.calls ? us(static_cast<double>(k.total_ns) / static_cast<double>(k.calls)) : 0.0, 100.0 * k.share,
              k.tensor_cores ? "y" : "-", k.name.c_str());
    }
  }
  appendf(out, "  Launches: %llu calls (%.1f ms of CPU), %llu of %llu kernels under 10 us, launch-to-start delay median %.1f us, p99 %.1f us\n",
          static_cast<unsigned long long>(g.launches), ms(g.launch_api_ns), static_cast<unsigned long long>(g.short_kernels),
          static_cast<unsigned long long>(g.kernels), us(static_cast<double>(g.median_launch_delay_ns)),
          us(static_cast<double>(g.p99_launch_delay_ns)));
  if (!g.syncs.empty()) {
    appendf(out, "  Synchronisation points (%.1f ms in all)\n", ms(g.sync_ns));
    for (size_t i = 0; i < g.syncs.size() && i < 5; ++i)
      appendf(out, "    %9.2f ms  x%-5llu %s  from %s\n", ms(g.syncs[i].total_ns),
              static_cast<unsigned long long>(g.syncs[i].calls), g.syncs[i].what.c_str(), g.syncs[i].context.c_str());
  }
  if (!g.gpu_time_by_layer.empty()) {
    out += "  GPU time per layer (nn.Module scopes), ms:    forward   backward\n";
    for (size_t i = 0; i < g.gpu_time_by_layer.size() && i < top; ++i) {
      const auto& l = g.gpu_time_by_layer[i];
      appendf(out, "    %-40.40s %10.2f %10.2f\n", l.module.c_str(), ms(l.forward_ns), ms(l.backward_ns));
    }
  }
  if (g.peak_allocated >= 0)
    appendf(out, "  Device memory: peak allocated %.0f MiB%s%s\n", static_cast<double>(g.peak_allocated) / (1 << 20),
            g.peak_is_lower_bound ? " (at least)" : "",
            g.peak_reserved >= 0 ? (", reserved " + std::to_string(g.peak_reserved >> 20) + " MiB").c_str() : "");
  if (g.pageable_copies > 0)
    appendf(out, "  Pageable memory copies: %llu, %.1f MiB, %.2f ms\n", static_cast<unsigned long long>(g.pageable_copies),
            static_cast<double>(g.pageable_bytes) / (1 << 20), ms(g.pageable_ns));
  return out;
}

// A live run's GPU window (model/run.h); null when the run is not a live
// one (a trace, a spill of an older launcher).
void write_gpu_window_json(JsonWriter& w, const GpuWindow& g) {
  w.key("gpu_window");
  if (g.mode.empty()) {
    w.null();
    return;
  }
  w.begin_object();
  w.field("mode", g.mode);
  w.field("state", to_string(g.state));
  w.field("note", g.note);
  w.field("trace", g.trace_path);
  w.key("activities").begin_array();
  for (const auto& x : g.activities) w.value(x);
  w.end_array();
  w.field("requested_steps", g.requested_steps);
  w.field("first_step", g.first_step);
  w.field("last_step", g.last_step);
  w.field("duration_ms", g.state == GpuWindowState::kRecorded ? ms(g.end_ns - g.start_ns) : 0.0);
  w.field("clock_offset_ns", g.clock_offset_ns);
  w.field("aligned_ops", g.aligned_ops);
  w.field("alignment_correction_us", static_cast<double>(g.alignment_correction_ns) / 1e3);
  w.field("alignment_stretch_ppm", g.alignment_stretch * 1e6);
  w.field("alignment_residual_us", static_cast<double>(g.alignment_residual_ns) / 1e3);
  w.key("cuda_peak_allocated_bytes").begin_array();
  for (int64_t b : g.cuda_peak_allocated) w.value(b);
  w.end_array();
  w.key("cuda_peak_reserved_bytes").begin_array();
  for (int64_t b : g.cuda_peak_reserved) w.value(b);
  w.end_array();
  w.end_object();
}

}  // namespace torchneck
