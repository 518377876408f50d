#include "report/experiments_report.h"
#include "report/terminal_report.h"

#include "model/processes.h"
#include "report/gpu_sections.h"
#include "report/cross_rank_report.h"

#include <cstdarg>
#include <algorithm>
#include <cstdio>

#include "core/clock.h"
#include "model/op_merge.h"
#include "report/appendf.h"

namespace torchneck {
namespace {

std::string short_path(const std::string& file, const std::string& cwd) {
  if (!cwd.empty() && file.size() > cwd.size() + 1 && file.compare(0, cwd.size(), cwd) == 0 &&
      file[cwd.size()] == '/')
    return file.substr(cwd.size() + 1);
  // Keep the last two components: "torch/nn/modules/module.py" → ".../modules/module.py".
  const auto last = file.rfind('/');
  if (last == std::string::npos || last == 0) return file;
  const auto prev = file.rfind('/', last - 1);
  if (prev == std::string::npos) return file;
  return "..." + file.substr(prev);
}

std::string ellipsize(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width - 3) + "...";
}

void section(std::string& out, const std::string& title) {
  out += "\n";
  if (!title.empty()) out += title + "\n";
}

void environment(std::string& out, const Run& run) {
  const EnvFacts& e = run.env;
  appendf(out, "Environment: Python %s, torch %s, %lld usable CPU cores, torch threads %lld, CUDA %s\n",
          e.python.c_str(), e.torch.c_str(), static_cast<long long>(e.cpu_cores),
          static_cast<long long>(e.torch_threads), e.cuda ? "available" : "not available");
  if (e.dataloaders.empty()) out += "DataLoaders: none created\n";
  for (size_t i = 0; i < e.dataloaders.size(); ++i) {
    const DataLoaderFacts& d = e.dataloaders[i];
    appendf(out, "DataLoader #%zu (%s, %s): num_workers=%lld batch_size=%s pin_memory=%s persistent_workers=%s prefetch_factor=%s\n",
            i + 1, d.dataset_type.c_str(), d.created_at.c_str(), static_cast<long long>(d.num_workers),
            d.batch_size < 0 ? "None" : std::to_string(d.batch_size).c_str(),
            d.pin_memory ? "True" : "False", d.persistent_workers ? "True" : "False",
            d.prefetch_factor < 0 ? "None" : std::to_string(d.prefetch_factor).c_str());
  }
}

// One line per DataLoader worker process, then the hottest functions of all
// workers together.
void worker_processes(std::string& out, const Run& run) {
  size_t n = 0;
  for (const auto& p : run.processes) n += p.role != ProcessRole::kMain;
  if (n == 0) return;
  appendf(out, "\nDataLoader worker processes: %zu profiled (busy = producing batches: Dataset + collate)\n", n);
  out += "  worker      pid  start   batches  ms/batch   busy %   CPU s  hottest function\n";
  for (const auto& p : run.processes) {
    if (p.role == ProcessRole::kMain) continue;
    const double busy = p.wall_s > 0 ? 100.0 * p.busy_s / p.wall_s : 0.0;
    appendf(out, "  %6lld %8lld  %-6s %7llu %9.2f %8.1f %7.2f  %s\n", static_cast<long long>(p.worker_id),
            static_cast<long long>(p.pid), p.start_method.c_str(), static_cast<unsigned long long>(p.batches),
            p.batches ? 1e3 * p.busy_s / static_cast<double>(p.batches) : 0.0, busy, p.cpu_s,
            p.top_functions.empty() ? "-" : p.top_functions.front().c_str());
  }
  int64_t all = 0;
  for (const auto& f : run.worker_python) all += f.self_ns;
  if (all > 0) {
    out += "  hottest Python functions across workers (self time):\n";
    for (size_t i = 0; i < run.worker_python.size() && i < 5; ++i) {
      const auto& f = run.worker_python[i];
      if (f.self_ns <= 0) break;
      appendf(out, "    %9.1f ms %5.1f%%  %s\n", ns_to_ms(f.self_ns), 100.0 * share(f.self_ns, all),
              short_function_label(f).c_str());
    }
  }
}

void python_traced(std::string& out, const Run& run, const Summary& s, const std::string& cwd) {
  appendf(out, "Python functions, top %zu by self time (cProfile columns, all threads; %.1f ms of Python self time)\n",
          s.top_python.size(), ns_to_ms(s.python_self_ns));
  out += "     ncalls    tottime    percall    cumtime    percall  filename:lineno(function)\n";
  for (size_t i : s.top_python) {
    const PyFunctionStats& f = run.python[i];
    std::string calls = std::to_string(f.calls);
    if (f.primitive_calls != f.calls) calls += "/" + std::to_string(f.primitive_calls);
    const double tt = ns_to_s(f.self_ns), ct = ns_to_s(f.total_ns);
    appendf(out, "%11s %10.3f %10.6f %10.3f %10.6f  %s\n", calls.c_str(), tt,
            f.calls ? tt / static_cast<double>(f.calls) : 0.0, ct,
            f.primitive_calls ? ct / static_cast<double>(f.primitive_calls) : 0.0,
            pstats_label(f, cwd).c_str());
  }
}

void python_sampled(std::string& out, const Run& run, const Summary& s, const std::string& cwd) {
  appendf(out, "Python functions, top %zu by self time (sampled: %llu samples over all threads)\n",
          s.top_python.size(), static_cast<unsigned long long>(run.python_samples));
  out += "    self ms   self %   total ms  total %  samples  filename:lineno(function)\n";
  int64_t all = 0;
  for (const auto& f : run.python) all += f.self_ns;
  for (size_t i : s.top_python) {
    const PyFunctionStats& f = run.python[i];
    appendf(out, "%11.1f %7.1f%% %10.1f %7.1f%% %8llu  %s\n", ns_to_ms(f.self_ns),
            100 * share(f.self_ns, all), ns_to_ms(f.total_ns), 100 * share(f.total_ns, all),
            static_cast<unsigned long long>(f.self_samples), pstats_label(f, cwd).c_str());
  }
}

void operators(std::string& out, const Run& run, const Summary& s) {
  appendf(out, "Operators, top %zu by self CPU time (%llu calls, %.1f ms self time in all)\n",
          s.top_ops.size(), static_cast<unsigned long long>(s.op_calls), ns_to_ms(s.op_self_ns));
  out += "  name                                  calls    self ms   avg us  share   total ms  most frequent input shapes\n";
  for (size_t i : s.top_ops) {
    const OpStats& op = run.ops[i];
    // The most frequent named signature; "(other)" only when nothing else was kept.
    std::string shapes = op.shapes.empty() ? "-" : op.shapes.front().shapes;
    for (const auto& sc : op.shapes)
      if (sc.shapes != kOtherShapes) {
        shapes = sc.shapes;
        break;
      }
    appendf(out, "  %-34s %8llu %10.2f %8.1f %5.1f%% %10.2f  %s\n", ellipsize(op.name, 34).c_str(),
            static_cast<unsigned long long>(op.calls), ns_to_ms(op.self_ns),
            op.calls ? ns_to_ms(op.self_ns) * 1000.0 / static_cast<double>(op.calls) : 0.0,
            100 * share(op.self_ns, s.op_self_ns), ns_to_ms(op.total_ns),
            ellipsize(shapes, 60).c_str());
  }
}

void scoped_table(std::string& out, const Run& run, const std::vector<size_t>& rows) {
  out += "  name                                                   calls   total ms    self ms\n";
  for (size_t i : rows) {
    const OpStats& op = run.ops[i];
    appendf(out, "  %-52s %7llu %10.2f %10.2f\n", ellipsize(op.name, 52).c_str(),
            static_cast<unsigned long long>(op.calls), ns_to_ms(op.total_ns), ns_to_ms(op.self_ns));
  }
}

// The machine's load beside the verdict, where the run measured it.
void machine_line(std::string& out, const MachineLoad& load) {
  if (load.cpu_wait_share < 0) return;
  appendf(out, "Machine: the loop waited for a CPU %.1f %% of its time (first to last step)", 100 * load.cpu_wait_share);
  if (load.other_cores >= 0)
    appendf(out, "; other work used %.1f of the %lld cores", load.other_cores, static_cast<long long>(load.cores));
  if (load.steal_share >= 0.01) appendf(out, "; steal %.1f %%", 100 * load.steal_share);
  out += load.busy() ? ": a busy machine, every time here includes the wait\n" : "\n";
}

void verdict_and_findings(std::string& out, const Diagnosis& d) {
  out += "\nVERDICT: " + d.verdict + "\n";
  machine_line(out, d.load);
  if (d.findings.empty()) return;
  out += "\nFindings, by estimated gain\n";
  int n = 0;
  for (const Finding& f : d.findings) {
    appendf(out, "%2d. [%s] %s: %s\n", ++n, to_string(f.severity), f.id.c_str(), f.title.c_str());
    for (const auto& e : f.evidence) out += "      evidence: " + e + "\n";
    out += "      fix:      " + f.recommendation + "\n";
    if (f.estimated_gain_pct)
      appendf(out, "      gain:     %s -%.0f %% step time (%s)\n", f.gain_is_upper_bound ? "up to" : "about",
              *f.estimated_gain_pct, f.gain_arithmetic.c_str());
    else out += "      gain:     " + f.gain_arithmetic + "\n";
    if (f.measured_gain_pct)
      appendf(out, "      measured: %+.1f %% step time (95 %% interval %+.1f .. %+.1f %%), with --try %s\n",
              -*f.measured_gain_pct, -f.measured_gain_high, -f.measured_gain_low, f.try_setting.c_str());
    else if (!f.try_setting.empty())
      out += "      try it:   torchneck run --try " + f.try_setting + " ... measures it without editing the script\n";
    if (!f.confidence.empty()) out += "      confidence: " + f.confidence + " (" + f.confidence_basis + ")\n";
  }
}

void step_breakdown(std::string& out, const StepAnalysis& s) {
  if (s.steps.empty()) return;
  char left_out[96];
  if (s.gpu_window_steps > 0)
    std::snprintf(left_out, sizeof left_out, "%zu warm-up and %zu of the GPU window left out", s.excluded - s.gpu_window_steps,
                  s.gpu_window_steps);
  else
    std::snprintf(left_out, sizeof left_out, "%zu warm-up left out", s.excluded);
  if (!s.count_source.empty())  // the window's steps are not the run's: say both, apart
    appendf(out, "\nStep time: %zu steps (%s.step calls over the whole run), %.2f ms each inside %s.step on average; "
            "the timeline window filled up within the first, so what follows is of its %zu %s spans: %.2f ms a span "
            "on average over %zu (%s), median %.2f ms\n",
            s.count, s.count_source.c_str(), ns_to_ms(s.counted_step_ns), s.count_source.c_str(), s.steps.size(),
            s.source.c_str(), ns_to_ms(s.step_ns), s.steady_count, left_out, ns_to_ms(s.median_ns));
  else
    appendf(out, "\nStep time: %zu steps (%s boundaries), %s; %.2f ms a step on average over the other %zu "
            "(every one with its whole time), median %.2f ms\n",
            s.count, s.source.c_str(), left_out, ns_to_ms(s.step_ns), s.steady_count, ns_to_ms(s.median_ns));
  static const char marks[] = {'D', 'O', 'B', 'F', 'E', '.'};
  constexpr int kWidth = 60;
  std::string bar;
  for (int p = 0; p < kNumPhases; ++p) {
    const auto cells = static_cast<int>(kWidth * share(s.breakdown.ns[p], s.step_ns) + 0.5);
    bar.append(static_cast<size_t>(std::max(0, cells)), marks[p]);
  }
  bar.resize(kWidth, '.');
  out += "  [" + bar + "]\n  ";
  bool first = true;
  for (int p = 0; p < kNumPhases; ++p) {
    if (p == static_cast<int>(Phase::kEvaluation) && s.breakdown.ns[p] == 0) continue;
    appendf(out, "%s%c %s %.2f ms (%.0f%%)", first ? "" : "  ", marks[p], phase_name(static_cast<Phase>(p)),
            ns_to_ms(s.breakdown.ns[p]), 100 * share(s.breakdown.ns[p], s.step_ns));
    first = false;
  }
  out += "\n";
  for (const FrozenForward& f : s.frozen)
    appendf(out, "  forward includes %s %s%s: %.2f ms a step, not evaluation\n",
            f.trained ? "the calls without backward of" : "frozen network", f.name.c_str(),
            f.trained ? " (in nearly every step)" : " (the loop trains none of its parameters)", ns_to_ms(f.ns_per_step));
  if (s.micro_batches_per_step > 1)
    appendf(out, "  %.0f backward passes per step (gradient accumulation's micro-batches, or several losses)\n",
            s.micro_batches_per_step);
  for (const SlowGroup& g : s.slow) {
    appendf(out, "  slow steps, %s: %zu", slow_kind_name(g.kind), g.steps.size());
    if (g.kind == SlowKind::kPeriodic) appendf(out, " (every %d steps from step %zu)", g.period, g.first + 1);
    appendf(out, ", %.2f ms beyond a typical %.2f ms step in all (%.1f %% of the steps' time), mostly %s%s%s\n",
            ns_to_ms(g.excess_ns), ns_to_ms(s.typical_ns), 100 * g.share, phase_name(g.phase),
            g.what.empty() ? "" : "; in them: ", g.what.c_str());
  }
  if (s.estimated_steps > 0)
    appendf(out, "  (detail windows: operators and layers recorded in %zu steps after warm-up%s; in the %zu others "
            "data and optimizer time measured, the rest of the breakdown estimated from the detailed ones; "
            "--detail=full records every step)\n",
            s.detailed_steady,
            s.detail_excluded > 0 ? ", left out of the step times (they carry the detail's cost)" : "",
            s.estimated_steps);
  if (s.count_source.empty() && s.timeline_truncated)
    appendf(out, "  (the timeline window filled up: these numbers are of its %zu steps, the first of %zu; "
            "--timeline-events=N keeps more)\n", s.steps.size(), s.count);
  if (!s.whole_run.empty()) {
    const RunClocks& c = s.whole_run;
    appendf(out, "  by the step clocks, steps %llu..%llu after the timeline: %.2f ms a step, data wait %.2f ms (%.1f %%); "
            "the whole run (steps %llu..%llu): %.2f ms a step, data wait %.2f ms (%.1f %%)\n",
            static_cast<unsigned long long>(c.beyond_first_step + 1), static_cast<unsigned long long>(c.last_step),
            c.beyond_step_ns / 1e6, c.beyond_data_ns / 1e6, (c.beyond_step_ns > 0 ? 100.0 * c.beyond_data_ns / c.beyond_step_ns : 0.0),
            static_cast<unsigned long long>(c.first_step + 1), static_cast<unsigned long long>(c.last_step),
            c.step_ns / 1e6, c.data_ns / 1e6, (c.step_ns > 0 ? 100.0 * c.data_ns / c.step_ns : 0.0));
  }
}

// Resident memory over the run and the garbage collections (analyze/memory.h).
void memory_section(std::string& out, const MemoryAnalysis& m, const GcAnalysis& g) {
  if (m.sampled) {
    const double mib = 1024.0 * 1024.0;
    if (m.fitted) {
      appendf(out, "\nMemory: resident %.0f MiB at the start of the steady steps, peak %.0f MiB, %+.1f MiB over steps %zu..%zu "
              "(%+.2f MiB per step, line fit R^2 %.2f, %zu samples)\n",
              static_cast<double>(m.rss_steady_start) / mib, static_cast<double>(m.rss_peak) / mib, m.growth_bytes / mib,
              m.span.first, m.span.last, m.growth_per_step_bytes / mib, m.fit.r2, m.fit_samples);
    } else {
      appendf(out, "\nMemory: resident %.0f MiB at the start, peak %.0f MiB, %.0f MiB at the end (%zu samples; %s)\n",
              static_cast<double>(m.rss_first) / mib, static_cast<double>(m.rss_peak) / mib,
              static_cast<double>(m.rss_last) / mib, m.samples,
              m.span.found ? "too few in the steady steps to fit a trend" : "no steady steps to fit a trend over");
    }
    if (m.torch_counted) {
      appendf(out, "  torch's CPU allocator: %.0f MiB at the start of the steady steps, peak %.0f MiB",
              static_cast<double>(std::max<int64_t>(0, m.torch_steady_start)) / mib,
              static_cast<double>(m.torch_peak) / mib);
      if (m.fitted) appendf(out, ", %+.1f MiB over the steady steps", m.torch_growth_bytes / mib);
      out += " (tensors' storages allocated during the run)\n";
    }
  }
  if (g.observed) {
    appendf(out, "%sGarbage collections: %llu in the run, %.1f ms, longest %.2f ms", m.sampled ? "" : "\n",
            static_cast<unsigned long long>(g.totals.collections), ns_to_ms(g.totals.total_ns), ns_to_ms(g.totals.max_ns));
    if (g.span.found && g.span_ns > 0)
      appendf(out, "; %.1f %% of the steady steps%s", 100.0 * g.share, g.estimated ? " (estimated)" : "");
    out += "\n";
  }
}

// The GPUs over the whole run from NVML (analyze/nvml.h): one line each.
void nvml_section(std::string& out, const Run& run, const NvmlAnalysis& a) {
  if (!a.sampled) return;
  const double mib = 1024.0 * 1024.0;
  out += "\n";
  for (size_t k = 0; k < run.nvml_devices.size() && k < a.devices.size(); ++k) {
    const NvmlDevice& d = run.nvml_devices[k];
    const NvmlDeviceSummary& s = a.devices[k];
    appendf(out, "GPU %zu (%s): utilisation ", k, d.name.empty() ? "unnamed" : d.name.c_str());
    if (s.gpu_util_mean >= 0) appendf(out, "mean %.0f %%", s.gpu_util_mean);
    else out += "unknown";
    if (s.gpu_util_steady_mean >= 0) appendf(out, " (steady steps %.0f %%)", s.gpu_util_steady_mean);
    if (s.mem_used_peak >= 0) {
      appendf(out, ", peak memory %.0f MiB", static_cast<double>(s.mem_used_peak) / mib);
      if (s.mem_total > 0) appendf(out, " of %.0f", static_cast<double>(s.mem_total) / mib);
    }
    if (s.power_mean_mw >= 0) appendf(out, ", power %.0f W", s.power_mean_mw / 1000.0);
    if (s.sm_clock_min >= 0 && s.sm_clock_max > s.sm_clock_min)
      appendf(out, ", SM clock %d..%d MHz", s.sm_clock_min, s.sm_clock_max);
    if (d.lost_t_ns >= 0) out += ", lost during the run";
    appendf(out, " (%zu samples)\n", s.samples);
  }
}

// What the collectors saw of torch.compile (analyze/compiled.h).
void compiled_section(std::string& out, const CompileAnalysis& c, const StepAnalysis& steps) {
  if (!c.seen) return;
  std::string modules;
  for (const auto& m : c.modules) modules += (modules.empty() ? "" : ", ") + m;
  appendf(out, "\ntorch.compile: %s; %zu compiled graph%s (Torch-Compiled Region) called %llu times, %llu recompilation%s\n",
          modules.empty() ? "no compiled module called (a compiled function)"
                          : ("compiled module " + modules + " [compiled]").c_str(),
          c.graphs.size(), c.graphs.size() == 1 ? "" : "s", static_cast<unsigned long long>(c.region_calls),
          static_cast<unsigned long long>(c.recompiles), c.recompiles == 1 ? "" : "s");
  appendf(out, "  inside: forward graph CompiledFunction %llu calls %.2f ms, backward CompiledFunctionBackward %llu calls %.2f ms;"
          " inductor's kernels run inside them with no operator events (only extern ops such as aten::mm show);"
          " their time is the compiled module's, as forward and backward\n",
          static_cast<unsigned long long>(c.forward_calls), ns_to_ms(c.forward_ns),
          static_cast<unsigned long long>(c.backward_calls), ns_to_ms(c.backward_ns));
  if (c.compile_ns > 0) {
    std::string which;
    size_t in_median = 0;
    for (size_t i : c.compile_steps) {
      in_median += steps.steps[i].steady;
      if (which.size() > 40) continue;
      which += (which.empty() ? "" : ", ") + std::to_string(i + 1);
      if (which.size() > 40) which += ", ...";
    }
    appendf(out, "  compilation: %.2f s (dynamo_timed scopes)%s%s%s\n", ns_to_s(c.compile_ns),
            which.empty() ? "" : ", in step ", which.c_str(),
            which.empty() ? "" : in_median == 0 ? " (warm-up: left out of the statistics)" : " (some in the statistics)");
  }
}

void layers_table(std::string& out, const LayerAnalysis& l, size_t top) {
  if (std::none_of(l.layers.begin(), l.layers.end(), [](const LayerStats& x) { return x.calls > 0; })) return;
  appendf(out, "\nLayers, top %zu by forward + backward (blocks include their children)\n", top);
  out += "  name                                type                calls  forward ms  backward ms      params";
  out += l.gpu ? "  GPU fwd ms  GPU bwd ms\n" : "\n";
  size_t shown = 0;
  for (const LayerStats& x : l.layers) {
    // A module built but not called in the recorded steps (a copy loaded
    // for evaluation after training, an unused head) ranks last at zero:
    // not a top layer.
    if (x.calls == 0) continue;
    if (shown++ == top) break;
    const std::string name = std::string(static_cast<size_t>(std::min(x.depth, 6)), ' ') + x.name +
                             (x.compiled ? " [compiled]" : "");
    appendf(out, "  %-35s %-18s %6llu %11.2f %12.2f %11lld", ellipsize(name, 35).c_str(),
            ellipsize(x.type, 18).c_str(), static_cast<unsigned long long>(x.calls), ns_to_ms(x.forward_ns),
            ns_to_ms(x.backward_ns), static_cast<long long>(x.params));
    if (l.gpu) appendf(out, " %11.2f %10.2f", ns_to_ms(x.gpu_forward_ns), ns_to_ms(x.gpu_backward_ns));
    out += "\n";
  }
  if (l.gpu)
    out += "  GPU columns: device time of the work each layer launched in the GPU window's steps (all of them, not per step)\n";
}

// The GPU window of a live run (model/run.h, GpuWindow): one line.
void gpu_window_line(std::string& out, const Run& run) {
  const GpuWindow& w = run.gpu_window;
  if (w.mode.empty()) return;
  if (w.state == GpuWindowState::kNoGpu) {
    out += "GPU: none (torch.cuda.is_available() is False): no GPU collection\n";
  } else if (w.state == GpuWindowState::kOff) {
    out += "GPU: not collected (--gpu=off)\n";
  } else if (w.state == GpuWindowState::kRecorded) {
    std::string acts;
    for (const auto& a : w.activities) acts += (acts.empty() ? "" : "+") + a;
    appendf(out, "GPU window: optimizer steps %lld..%lld (torch.profiler/Kineto, %s activity), %.1f ms; trace %s%s%s\n",
            static_cast<long long>(w.first_step), static_cast<long long>(w.last_step), acts.c_str(),
            ns_to_ms(w.end_ns - w.start_ns), w.trace_path.c_str(), w.note.empty() ? "" : "; ", w.note.c_str());
    if (w.activities.size() == 1) out += "  CPU activity only: no device to analyse\n";
    if (w.aligned_ops > 0) {
      // A stretch: Kineto's TSC-to-time conversion off (gpu_window.h).
      std::string stretch;
      if (w.alignment_stretch != 0.0) appendf(stretch, " and stretched %+.0f ppm", w.alignment_stretch * 1e6);
      appendf(out, "  clocks aligned on %llu operators both recorded: moved %+.1f us%s, %.1f us apart after (median)\n",
              static_cast<unsigned long long>(w.aligned_ops), static_cast<double>(w.alignment_correction_ns) / 1e3,
              stretch.c_str(),
              static_cast<double>(w.alignment_residual_ns) / 1e3);
    }
  } else {
    appendf(out, "GPU window: %s%s\n", w.note.empty() ? "not recorded" : "", w.note.c_str());
  }
  for (size_t d = 0; d < w.cuda_peak_allocated.size() && d < w.cuda_peak_reserved.size(); ++d)
    appendf(out, "  cuda:%zu: torch's caching allocator peaked at %.0f MiB allocated, %.0f MiB reserved over the run\n", d,
            static_cast<double>(w.cuda_peak_allocated[d]) / (1024.0 * 1024.0),
            static_cast<double>(w.cuda_peak_reserved[d]) / (1024.0 * 1024.0));
}

}  // namespace

std::string pstats_label(const PyFunctionStats& f, const std::string& cwd) {
  if (f.file == "~" && f.line == 0) {
    const std::string& n = f.function;
    if (n.size() >= 2 && n.front() == '<' && n.back() == '>') return "{" + n.substr(1, n.size() - 2) + "}";
    return n;
  }
  return short_path(f.file, cwd) + ":" + std::to_string(f.line) + "(" + f.function + ")";
}

std::string terminal_report(const Run& run, const Analysis& analysis, const TerminalReportOptions& o) {
  const Summary& s = analysis.summary;
  std::string out;
  out += "==================================== torchneck ====================================\n";
  const EndingKind ending = run.run.ending.kind;
  const char* python_mode = to_string(run.run.python_mode);
  if (ending == EndingKind::kIngestedTrace) {
    appendf(out, "Trace: %s — %.3f s of profile (torch.profiler / Kineto)\n", run.run.script.c_str(), run.run.wall_s);
  } else if (ending == EndingKind::kStillRunning) {
    // A periodic spill, read back by `torchneck report` after the process
    // vanished without a word (kill -9, out-of-memory killer, power).
    appendf(out, "Run: %s — no final report: the process ended without one (killed, e.g. kill -9 or the OOM killer)\n",
            run.run.script.c_str());
    appendf(out, "     this report is the last periodic spill, %.2f s into the run; Python profile: %s\n",
            run.run.wall_s, python_mode);
  } else if (ending == EndingKind::kFatalSignal) {
    appendf(out, "Run: %s — died by %s after %.2f s (exit status %d), Python profile: %s\n", run.run.script.c_str(),
            to_string(run.run.ending).substr(13).c_str(), run.run.wall_s, run.run.exit_code, python_mode);
  } else {
    appendf(out, "Run: %s — exit status %d%s%s, %.2f s wall, Python profile: %s\n", run.run.script.c_str(),
            run.run.exit_code, ending == EndingKind::kFinished ? "" : ", ",
            ending == EndingKind::kFinished ? "" : to_string(run.run.ending).c_str(), run.run.wall_s, python_mode);
  }
  verdict_and_findings(out, analysis.diagnosis);
  out += ranks_terminal_section(analysis.ranks);
  if (!analysis.ranks.empty())
    appendf(out, "\n(the sections below are rank %lld's; %s)\n", static_cast<long long>(analysis.ranks.ranks.front().rank),
            run.run.ending.kind == EndingKind::kIngestedTrace ? "`torchneck analyze` of one rank's trace gives its own"
                                                              : "each rank's own report is in its rank-K folder");
  out += experiments_text(analysis.experiments);
  step_breakdown(out, analysis.steps);
  memory_section(out, analysis.memory, analysis.gc);
  nvml_section(out, run, analysis.nvml);
  compiled_section(out, analysis.compiled, analysis.steps);
  layers_table(out, analysis.layers, o.top);
  out += "\n";
  if (analysis.gpu.empty() || ending != EndingKind::kIngestedTrace) environment(out, run);
  gpu_window_line(out, run);
  for (const auto& g : analysis.gpu) out += gpu_terminal_section(g, o.top);
  worker_processes(out, run);
  if (run.run.python_mode != PythonMode::kOff) {
    section(out, "");
    if (run.run.python_mode == PythonMode::kTrace) python_traced(out, run, s, o.cwd);
    else python_sampled(out, run, s, o.cwd);
  }
  section(out, "");
  if (run.ops.empty()) out += "Operators: none recorded (the script ran no torch operator).\n";
  else operators(out, run, s);
  if (!s.top_backward.empty()) {
    section(out, "Backward nodes (autograd), top by total time");
    scoped_table(out, run, s.top_backward);
  }
  if (!s.top_scopes.empty()) {
    section(out, "User scopes (DataLoader, optimizer, record_function), top by total time");
    scoped_table(out, run, s.top_scopes);
  }
  if (run.dropped_events > 0 || !run.notes.empty()) section(out, "Notes");
  if (run.dropped_events > 0)
    appendf(out, "  %llu operator events beyond the timeline window were aggregated but not kept.\n",
            static_cast<unsigned long long>(run.dropped_events));
  for (const auto& n : run.notes) out += "  " + n + "\n";
  return out;
}

std::string files_section(const std::string& dir, const std::vector<WrittenFile>& written,
                          const std::vector<std::string>& failed) {
  std::string out;
  section(out, "Files");
  for (const WrittenFile& f : written) appendf(out, "  %s/%-24s %s\n", dir.c_str(), f.name.c_str(), f.how.c_str());
  for (const auto& f : failed) appendf(out, "  not written: %s\n", f.c_str());
  return out;
}

}  // namespace torchneck
