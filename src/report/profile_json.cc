#include "report/profile_json.h"

#include "core/clock.h"
#include "report/experiments_report.h"
#include "report/gpu_sections.h"
#include "report/cross_rank_report.h"
#include "report/json_writer.h"
#include "report/profile_json_steps.h"

#include <algorithm>
#include <numeric>

namespace torchneck {
namespace {

void write_run(JsonWriter& w, const RunInfo& r) {
  w.key("run").begin_object();
  w.field("script", r.script);
  w.key("argv").begin_array();
  for (const auto& a : r.argv) w.value(a);
  w.end_array();
  w.field("exit_code", r.exit_code);
  w.field("ending", to_string(r.ending));
  w.field("wall_s", r.wall_s);
  w.key("main_thread_cpu_s");
  r.main_thread_cpu_s < 0 ? w.null() : w.value(r.main_thread_cpu_s);
  w.key("main_thread_runqueue_s");
  r.main_thread_runqueue_s < 0 ? w.null() : w.value(r.main_thread_runqueue_s);
  w.key("process_cpu_s");
  r.process_cpu_s < 0 ? w.null() : w.value(r.process_cpu_s);
  w.key("machine_cpu_s");
  r.machine_cpu_s < 0 ? w.null() : w.value(r.machine_cpu_s);
  w.key("machine_steal_s");
  r.machine_steal_s < 0 ? w.null() : w.value(r.machine_steal_s);
  w.field("python_mode", to_string(r.python_mode));
  w.end_object();
}

void write_env(JsonWriter& w, const EnvFacts& e) {
  w.key("env").begin_object();
  w.field("python", e.python);
  w.field("torch", e.torch);
  w.field("cpu_cores", e.cpu_cores);
  w.field("torch_threads", e.torch_threads);
  w.field("cuda", e.cuda);
  w.key("optimizers").begin_array();
  for (const auto& o : e.optimizers) {
    w.begin_object().field("type", o.type).field("param_tensors", o.param_tensors).field("foreach", o.foreach).end_object();
  }
  w.end_array();
  w.key("dataloaders").begin_array();
  for (const auto& d : e.dataloaders) {
    w.begin_object();
    w.field("num_workers", d.num_workers);
    w.key("batch_size");
    d.batch_size < 0 ? w.null() : w.value(d.batch_size);
    w.field("pin_memory", d.pin_memory);
    w.field("persistent_workers", d.persistent_workers);
    w.key("prefetch_factor");
    d.prefetch_factor < 0 ? w.null() : w.value(d.prefetch_factor);
    w.field("dataset", d.dataset_type);
    w.field("created_at", d.created_at);
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

// Indices of the rows to write, in their order: all of them, or the `cap`
// heaviest by self time together with the `cap` heaviest by total time.
template <class Row>
std::vector<size_t> heaviest_rows(const std::vector<Row>& rows, size_t cap) {
  std::vector<size_t> idx(rows.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  if (rows.size() <= cap) return idx;
  std::vector<bool> keep(rows.size(), false);
  for (auto key : {&Row::self_ns, &Row::total_ns}) {
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(cap), idx.end(),
                      [&](size_t a, size_t b) { return rows[a].*key > rows[b].*key; });
    for (size_t i = 0; i < cap; ++i) keep[idx[i]] = true;
  }
  idx.clear();
  for (size_t i = 0; i < rows.size(); ++i)
    if (keep[i]) idx.push_back(i);
  return idx;
}

void write_python(JsonWriter& w, const Run& run, size_t cap) {
  const bool sampled = run.run.python_mode == PythonMode::kSample;
  w.key("python").begin_array();
  for (size_t i : heaviest_rows(run.python, cap)) {
    const auto& f = run.python[i];
    w.begin_object();
    w.field("function", f.function);
    w.field("file", f.file);
    w.field("line", f.line);
    if (sampled) {
      w.key("calls").null();  // a sampler cannot count calls
      w.field("self_samples", f.self_samples);
      w.field("total_samples", f.total_samples);
    } else {
      w.field("calls", f.calls);
      w.field("primitive_calls", f.primitive_calls);
    }
    w.field("self_ms", ns_to_ms(f.self_ns));
    w.field("total_ms", ns_to_ms(f.total_ns));
    w.end_object();
  }
  w.end_array();
}

void write_ops(JsonWriter& w, const Run& run, size_t cap, size_t shapes_cap) {
  w.key("ops").begin_array();
  for (size_t i : heaviest_rows(run.ops, cap)) {
    const auto& op = run.ops[i];
    w.begin_object();
    w.field("name", op.name);
    w.field("kind", op_kind_name(op.kind));
    w.field("calls", op.calls);
    w.field("self_ms", ns_to_ms(op.self_ns));
    w.field("total_ms", ns_to_ms(op.total_ns));
    w.key("shapes").begin_array();
    for (size_t k = 0; k < op.shapes.size() && k < shapes_cap; ++k) {
      const auto& s = op.shapes[k];
      w.begin_object().field("shapes", s.shapes).field("count", s.count).end_object();
    }
    w.end_array();
    w.key("threads").begin_array();
    for (uint32_t t : op.thread_indices) w.value(static_cast<int64_t>(t));
    w.end_array();
    w.end_object();
  }
  w.end_array();
}

// DataLoader worker processes and what they spent their time on (issue 6).
void write_processes(JsonWriter& w, const Run& run) {
  constexpr size_t kTopWorkerRows = 30;
  const int64_t main_start_ns = run.processes.empty() ? 0 : run.processes.front().start_ns;
  w.key("processes").begin_array();
  for (const auto& p : run.processes) {
    w.begin_object();
    w.field("pid", p.pid);
    w.field("role", to_string(p.role));
    w.key("worker_id");
    p.worker_id < 0 ? w.null() : w.value(p.worker_id);
    if (!p.start_method.empty()) w.field("start_method", p.start_method);
    w.field("wall_s", p.wall_s);
    w.key("start_s");
    p.start_ns > 0 && main_start_ns > 0 ? w.value(1e-9 * static_cast<double>(p.start_ns - main_start_ns)) : w.null();
    w.field("busy_s", p.busy_s);
    w.field("busy_pct", 100.0 * share(static_cast<int64_t>(p.busy_s * 1e9), static_cast<int64_t>(p.wall_s * 1e9)));
    w.key("cpu_s");
    p.cpu_s < 0 ? w.null() : w.value(p.cpu_s);
    if (p.role != ProcessRole::kMain) {
      w.field("batches", p.batches);
      w.key("mean_batch_ms");
      p.batches == 0 ? w.null() : w.value(1e3 * p.busy_s / static_cast<double>(p.batches));
      w.field("max_batch_ms", ns_to_ms(p.batch_ns_max));
      w.field("op_calls", p.op_calls);
      w.field("python_samples", p.python_samples);
      w.key("top_functions").begin_array();
      for (const auto& f : p.top_functions) w.value(f);
      w.end_array();
    }
    w.end_object();
  }
  w.end_array();
  w.key("worker_python").begin_array();
  for (size_t i = 0; i < run.worker_python.size() && i < kTopWorkerRows; ++i) {
    const auto& f = run.worker_python[i];
    w.begin_object();
    w.field("function", f.function).field("file", f.file).field("line", f.line);
    w.field("self_ms", ns_to_ms(f.self_ns)).field("total_ms", ns_to_ms(f.total_ns));
    w.field("calls", f.calls).field("self_samples", f.self_samples).field("total_samples", f.total_samples);
    w.end_object();
  }
  w.end_array();
  w.key("worker_ops").begin_array();
  for (size_t i = 0; i < run.worker_ops.size() && i < kTopWorkerRows; ++i) {
    const auto& o = run.worker_ops[i];
    w.begin_object();
    w.field("name", o.name).field("kind", op_kind_name(o.kind)).field("calls", o.calls);
    w.field("self_ms", ns_to_ms(o.self_ns)).field("total_ms", ns_to_ms(o.total_ns));
    w.end_object();
  }
  w.end_array();
}

void string_array(JsonWriter& w, const char* key, const std::vector<std::string>& v) {
  w.key(key).begin_array();
  for (const auto& x : v) w.value(x);
  w.end_array();
}

void write_layers(JsonWriter& w, const LayerAnalysis& l, size_t cap) {
  w.key("layers").begin_array();
  for (size_t i = 0; i < l.layers.size() && i < cap; ++i) {
    const LayerStats& x = l.layers[i];
    w.begin_object();
    w.field("name", x.name);
    w.field("type", x.type);
    w.field("calls", x.calls);
    w.field("forward_ms", ns_to_ms(x.forward_ns));
    w.field("backward_ms", ns_to_ms(x.backward_ns));
    w.field("stalled_ms", ns_to_ms(x.stalled_ns));
    w.field("eval_calls", x.eval_calls);
    w.field("eval_forward_ms", ns_to_ms(x.eval_forward_ns));
    w.field("params", x.params);
    w.field("depth", x.depth);
    w.field("leaf", x.leaf);
    w.field("compiled", x.compiled);
    if (l.gpu) {
      w.field("gpu_forward_ms", ns_to_ms(x.gpu_forward_ns));
      w.field("gpu_backward_ms", ns_to_ms(x.gpu_backward_ns));
      w.field("gpu_launches", x.gpu_launches);
    } else {
      w.key("gpu_forward_ms").null();
      w.key("gpu_backward_ms").null();
      w.field("gpu_launches", uint64_t{0});
    }
    w.end_object();
  }
  w.end_array();
  w.field("backward_unattributed_ms", ns_to_ms(l.backward_unattributed_ns));
  if (l.gpu) {
    w.field("layers_gpu_attributed_ms", ns_to_ms(l.gpu_attributed_ns));
    w.field("layers_gpu_unattributed_ms", ns_to_ms(l.gpu_unattributed_ns));
  }
}

void write_compiled(JsonWriter& w, const CompileAnalysis& c, const StepAnalysis& steps) {
  w.key("compiled").begin_object();
  w.field("seen", c.seen);
  string_array(w, "modules", c.modules);
  string_array(w, "graphs", c.graphs);
  w.field("recompiles", c.recompiles);
  w.field("region_calls", c.region_calls);
  w.field("forward_calls", c.forward_calls);
  w.field("forward_ms", ns_to_ms(c.forward_ns));
  w.field("backward_calls", c.backward_calls);
  w.field("backward_ms", ns_to_ms(c.backward_ns));
  w.field("compile_ms", ns_to_ms(c.compile_ns));
  w.key("compile_steps").begin_array();
  for (size_t i : c.compile_steps) w.value(static_cast<uint64_t>(i));
  w.end_array();
  uint64_t in_median = 0;
  for (size_t i : c.compile_steps) in_median += i < steps.steps.size() && steps.steps[i].steady;
  w.field("compile_steps_in_median", in_median);
  w.end_object();
}

void write_findings(JsonWriter& w, const Diagnosis& d) {
  w.key("findings").begin_array();
  for (const Finding& f : d.findings) {
    w.begin_object();
    w.field("id", f.id);
    w.field("severity", to_string(f.severity));
    w.field("title", f.title);
    w.key("evidence").begin_array();
    for (const auto& e : f.evidence) w.value(e);
    w.end_array();
    w.field("recommendation", f.recommendation);
    w.key("estimated_gain_pct");
    if (f.estimated_gain_pct) w.value(*f.estimated_gain_pct);
    else w.null();
    w.field("gain_arithmetic", f.gain_arithmetic);
    w.field("gain_is_upper_bound", f.gain_is_upper_bound);
    w.field("confidence", f.confidence);
    w.field("confidence_basis", f.confidence_basis);
    w.field("try_setting", f.try_setting);
    w.key("measured_gain_pct");
    f.measured_gain_pct ? w.value(*f.measured_gain_pct) : w.null();
    w.key("measured_gain_ci95_pct");
    if (f.measured_gain_pct) w.begin_array().value(f.measured_gain_low).value(f.measured_gain_high).end_array();
    else w.null();
    for (const auto& [key, value] : f.numbers) w.field(key.c_str(), value);
    if (f.rank) w.field("rank", *f.rank);
    if (!f.cause.empty()) w.field("cause", f.cause);
    w.end_object();
  }
  w.end_array();
  w.field("verdict", d.verdict);
  const MachineLoad& l = d.load;
  w.key("machine_load");
  if (l.cpu_wait_share < 0) {
    w.null();
    return;
  }
  w.begin_object().field("cpu_wait_pct", 100 * l.cpu_wait_share).field("busy", l.busy());
  w.key("other_cores");
  l.other_cores < 0 ? w.null() : w.value(l.other_cores);
  w.key("steal_pct");
  l.steal_share < 0 ? w.null() : w.value(100 * l.steal_share);
  w.end_object();
}

// Resident memory: the samples (ms since the first one) and the fit over
// the steady steps (analyze/memory.h); the growing autograd graphs.
void write_memory(JsonWriter& w, const Run& run, const MemoryAnalysis& m) {
  w.key("memory").begin_object();
  w.field("sampled", m.sampled);
  w.field("interval_ms", ns_to_ms(m.interval_ns));
  w.field("samples", static_cast<uint64_t>(m.samples));
  w.field("rss_first_bytes", m.rss_first);
  w.field("rss_last_bytes", m.rss_last);
  w.field("rss_peak_bytes", m.rss_peak);
  const int64_t t0 = run.memory.empty() ? 0 : run.memory.front().t_ns;
  w.field("peak_t_ms", m.sampled ? ns_to_ms(m.peak_t_ns - t0) : 0.0);
  w.field("torch_counted", m.torch_counted);
  w.field("torch_first_bytes", m.torch_first);
  w.field("torch_last_bytes", m.torch_last);
  w.field("torch_peak_bytes", m.torch_peak);
  w.key("steady");
  if (!m.span.found) {
    w.null();
  } else {
    w.begin_object();
    w.field("first_step", static_cast<uint64_t>(m.span.first));
    w.field("last_step", static_cast<uint64_t>(m.span.last));
    w.field("fitted", m.fitted);
    w.field("fit_samples", static_cast<uint64_t>(m.fit_samples));
    w.field("rss_start_bytes", m.rss_steady_start);
    w.field("growth_bytes", m.growth_bytes);
    w.field("growth_per_step_bytes", m.growth_per_step_bytes);
    w.field("slope_bytes_per_s", m.fit.slope);
    w.field("r2", m.fit.r2);
    w.field("late_slope_bytes_per_s", m.late_fit.slope);
    w.field("recorded_bytes", m.recorded_bytes);
    w.field("torch_start_bytes", m.torch_steady_start);
    w.field("torch_growth_bytes", m.torch_growth_bytes);
    w.end_object();
  }
  // [ms since the first sample, resident bytes, torch's CPU allocator bytes or null]
  w.key("series").begin_array();
  for (const MemorySample& s : run.memory) {
    w.begin_array();
    w.value(ns_to_ms(s.t_ns - t0));
    w.value(s.rss_bytes);
    if (s.torch_allocated_bytes >= 0) w.value(s.torch_allocated_bytes);
    else w.null();
    w.end_array();
  }
  w.end_array();
  w.key("growing_graphs").begin_array();
  for (const GrowingGraph& g : run.growing_graphs) {
    w.begin_object();
    w.field("variable", g.variable);
    w.field("scope", g.scope);
    w.field("file", g.file);
    w.field("line", static_cast<int64_t>(g.line));
    w.field("code", g.code);
    w.field("nodes_first", g.nodes_first);
    w.field("nodes_last", g.nodes_last);
    w.field("nodes_cap", g.nodes_cap);
    w.field("step_first", g.step_first);
    w.field("step_last", g.step_last);
    w.field("kept", g.kept);
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

// The GPUs over the run from NVML (analyze/nvml.h): the devices, each one's
// summary and its samples, [ms, gpu %, memory %, used bytes, SM MHz, power
// mW] with null for a figure NVML could not read; ms on the memory
// series' clock (since its first sample; since the first GPU sample when
// memory was not sampled).
void write_nvml(JsonWriter& w, const Run& run, const NvmlAnalysis& a) {
  w.key("nvml").begin_object();
  w.field("sampled", a.sampled);
  w.field("interval_ms", ns_to_ms(a.interval_ns));
  const int64_t t0 = !run.memory.empty() ? run.memory.front().t_ns : !run.nvml.empty() ? run.nvml.front().t_ns : 0;
  auto value_or_null = [&w](int64_t v) {
    if (v >= 0) w.value(v);
    else w.null();
  };
  auto mean_or_null = [&w](const char* key, double v) {
    w.key(key);
    if (v >= 0) w.value(v);
    else w.null();
  };
  w.key("devices").begin_array();
  for (size_t k = 0; k < run.nvml_devices.size() && k < a.devices.size(); ++k) {
    const NvmlDevice& d = run.nvml_devices[k];
    const NvmlDeviceSummary& s = a.devices[k];
    w.begin_object();
    w.field("index", static_cast<int64_t>(k));
    w.field("nvml_index", static_cast<int64_t>(d.nvml_index));
    w.field("name", d.name);
    w.field("uuid", d.uuid);
    w.key("memory_total_bytes");
    value_or_null(d.mem_total_bytes);
    w.key("lost_ms");
    if (d.lost_t_ns >= 0) w.value(ns_to_ms(d.lost_t_ns - t0));
    else w.null();
    w.field("samples", static_cast<uint64_t>(s.samples));
    mean_or_null("gpu_util_mean_pct", s.gpu_util_mean);
    mean_or_null("gpu_util_steady_mean_pct", s.gpu_util_steady_mean);
    w.field("steady_samples", static_cast<uint64_t>(s.steady_samples));
    w.key("gpu_util_peak_pct");
    value_or_null(s.gpu_util_peak);
    mean_or_null("mem_util_mean_pct", s.mem_util_mean);
    w.key("memory_used_peak_bytes");
    value_or_null(s.mem_used_peak);
    mean_or_null("power_mean_mw", s.power_mean_mw);
    w.key("power_peak_mw");
    value_or_null(s.power_peak_mw);
    w.key("sm_clock_min_mhz");
    value_or_null(s.sm_clock_min);
    w.key("sm_clock_max_mhz");
    value_or_null(s.sm_clock_max);
    w.key("series").begin_array();
    for (const NvmlSample& x : run.nvml) {
      if (x.device != k) continue;
      w.begin_array();
      w.value(ns_to_ms(x.t_ns - t0));
      value_or_null(x.gpu_util_pct);
      value_or_null(x.mem_util_pct);
      value_or_null(x.mem_used_bytes);
      value_or_null(x.sm_clock_mhz);
      value_or_null(x.power_mw);
      w.end_array();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

void write_gc(JsonWriter& w, const GcAnalysis& g, size_t kept) {
  w.key("gc").begin_object();
  w.field("observed", g.observed);
  w.field("collections", g.totals.collections);
  w.field("total_ms", ns_to_ms(g.totals.total_ns));
  w.field("max_ms", ns_to_ms(g.totals.max_ns));
  w.field("collected", g.totals.collected);
  w.field("kept_pauses", static_cast<uint64_t>(kept));
  w.field("dropped_pauses", g.totals.dropped);
  auto generations = [&](const uint64_t* n, const int64_t* ns) {
    w.key("by_generation").begin_array();
    for (int i = 0; i < GcTotals::kGenerations; ++i) {
      w.begin_object();
      w.field("collections", n[i]);
      w.field("ms", ns_to_ms(ns[i]));
      w.end_object();
    }
    w.end_array();
  };
  generations(g.totals.by_generation, g.totals.ns_by_generation);
  w.key("steady");
  if (!g.span.found || !g.observed) {
    w.null();
  } else {
    w.begin_object();
    w.field("first_step", static_cast<uint64_t>(g.span.first));
    w.field("last_step", static_cast<uint64_t>(g.span.last));
    w.field("span_ms", ns_to_ms(g.span_ns));
    w.field("collections", g.collections);
    w.field("pause_ms", ns_to_ms(g.pause_ns));
    w.field("max_ms", ns_to_ms(g.max_ns));
    w.field("share", g.share);
    w.field("estimated", g.estimated);
    generations(g.by_generation, g.ns_by_generation);
    w.end_object();
  }
  w.end_object();
}

}  // namespace

std::string profile_json(const Run& run, const Analysis& analysis) { return profile_json(run, analysis, {}); }

std::string profile_json(const Run& run, const Analysis& analysis, const ProfileJsonLimits& limits) {
  const size_t n_steps = analysis.steps.steps.size();
  const size_t every = (limits.per_step > 0 && n_steps > limits.per_step) ? (n_steps + limits.per_step - 1) / limits.per_step : 1;
  const Summary& summary = analysis.summary;
  JsonWriter w(1);
  w.begin_object();
  w.field("schema", kProfileSchema);
  write_run(w, run.run);
  write_env(w, run.env);
  w.key("threads").begin_array();
  for (size_t i = 0; i < run.threads.size(); ++i) {
    w.begin_object();
    w.field("index", static_cast<int64_t>(i));
    w.field("tid", run.threads[i].os_tid);
    w.field("name", run.threads[i].name);
    w.end_object();
  }
  w.end_array();
  write_python(w, run, limits.python);
  w.field("python_samples", run.python_samples);
  w.field("timeline_samples", static_cast<uint64_t>(run.samples.size()));
  w.field("dropped_samples", run.dropped_samples);
  write_ops(w, run, limits.ops, limits.shapes);
  w.key("totals").begin_object();
  w.field("op_self_ms", ns_to_ms(summary.op_self_ns));
  w.field("op_calls", summary.op_calls);
  w.field("backward_self_ms", ns_to_ms(summary.backward_self_ns));
  w.field("python_self_ms", ns_to_ms(summary.python_self_ns));
  w.end_object();
  write_steps(w, analysis.steps, every);
  write_layers(w, analysis.layers, limits.layers);
  write_compiled(w, analysis.compiled, analysis.steps);
  write_findings(w, analysis.diagnosis);
  write_processes(w, run);
  write_memory(w, run, analysis.memory);
  write_gc(w, analysis.gc, run.gc_pauses.size());
  write_gpu_window_json(w, run.gpu_window);
  write_experiments_json(w, analysis.experiments);
  write_nvml(w, run, analysis.nvml);
  if (!analysis.gpu.empty()) {
    w.key("gpu");
    write_gpu_json(w, analysis.gpu.front());
  }
  write_ranks_json(w, analysis.ranks, analysis.gpu);  // report/cross_rank_report.h
  w.field("timeline_events", static_cast<uint64_t>(run.timeline.size()));
  w.field("dropped_events", run.dropped_events);
  w.key("notes").begin_array();
  for (const auto& n : run.notes) w.value(n);
  w.end_array();
  if (every > 1 || run.python.size() > limits.python || run.ops.size() > limits.ops ||
      analysis.layers.layers.size() > limits.layers) {
    w.key("html_limits").begin_object();
    w.field("per_step_every", static_cast<uint64_t>(every));
    // Rows in the run; the arrays above hold those kept.
    w.field("python_rows", static_cast<uint64_t>(run.python.size()));
    w.field("ops_rows", static_cast<uint64_t>(run.ops.size()));
    w.field("layers_rows", static_cast<uint64_t>(analysis.layers.layers.size()));
    w.end_object();
  }
  w.end_object();
  std::string out = w.str();
  out += '\n';
  return out;
}

}  // namespace torchneck
