// The spill's sections and their fields, each declared once (run_io_fields.h
// reads them to encode, decode, size-check and spell out the format);
// run_io.cc has the header, the blocks and the files.
#include "model/run_io_fields.h"

namespace torchneck::run_io_detail {
namespace {

template <typename IO, typename R>
void caller_fields(IO& io, R& c) {
  io.num(c.caller);  // checked once the whole table is read
  io.num(c.calls);
  io.num(c.primitive_calls);
  io.num(c.self_ns);
  io.num(c.total_ns);
}

template <typename IO, typename R>
void function_fields(IO& io, R& f) {
  io.str(f.function);
  io.str(f.file);
  io.num(f.line);
  io.flag(f.builtin);
  io.num(f.calls);
  io.num(f.primitive_calls);
  io.num(f.self_ns);
  io.num(f.total_ns);
  io.num(f.self_samples);
  io.num(f.total_samples);
  io.list(f.callers, [](auto& io, auto& c) { caller_fields(io, c); });
}

template <typename IO, typename Functions>
void functions_fields(IO& io, Functions& fs) {
  io.list(fs, [](auto& io, auto& f) { function_fields(io, f); });
  io.check(
      [&fs] {
        for (const auto& f : fs)
          for (const auto& c : f.callers)
            if (c.caller >= fs.size()) return false;
        return true;
      },
      "a caller index is out of range");
}

// Thread indices are checked against `threads` (SIZE_MAX: not checked, for
// other processes' operators, whose threads are not in this run).
template <typename IO, typename Ops>
void ops_fields(IO& io, Ops& ops, size_t threads) {
  io.list(ops, [threads](auto& io, auto& o) {
    io.str(o.name);
    io.op_kind(o.kind);
    io.num(o.calls);
    io.num(o.self_ns);
    io.num(o.total_ns);
    io.list(o.shapes, [](auto& io, auto& s) {
      io.str(s.shapes);
      io.num(s.count);
    });
    io.list(o.thread_indices, [threads](auto& io, auto& t) { io.index(t, threads, "operator thread"); });
  });
}

template <typename IO, typename Processes>
void processes_fields(IO& io, Processes& ps) {
  io.list(ps, [](auto& io, auto& p) {
    io.num(p.pid);
    io.name(p.role, process_role_from_string);
    io.num(p.worker_id);
    io.str(p.start_method);
    io.num(p.wall_s);
    io.num(p.start_ns);
    io.num(p.busy_s);
    io.num(p.cpu_s);
    io.num(p.batches);
    io.num(p.batch_ns_max);
    io.num(p.op_calls);
    io.num(p.python_samples);
    io.strs(p.top_functions);
  });
}

template <typename IO, typename Numbers>
void numbers_fields(IO& io, Numbers& v) {
  io.list(v, [](auto& io, auto& x) { io.num(x); });
}

// A thread index stored before the threads are known to be any (a run
// without threads) is not checked.
template <typename R>
bool thread_in_range(R& run, uint32_t index) {
  return run.threads.empty() || index < run.threads.size();
}

template <typename IO, typename R>
void run_info_fields(IO& io, R& run) {
  auto& ri = run.run;
  io.str(ri.script);
  io.strs(ri.argv);
  io.num(ri.exit_code);
  io.num(ri.wall_s);
  io.num(ri.main_thread_cpu_s);
  io.num(ri.main_thread_runqueue_s);
  io.num(ri.process_cpu_s);
  io.num(ri.machine_cpu_s);
  io.num(ri.machine_steal_s);
  io.name(ri.python_mode, python_mode_from_string);
  io.name(ri.ending, run_ending_from_string);
  io.num(ri.start_unix_s);
}

template <typename IO, typename R>
void env_fields(IO& io, R& run) {
  auto& e = run.env;
  io.str(e.python);
  io.str(e.torch);
  io.num(e.cpu_cores);
  io.num(e.torch_threads);
  io.flag(e.cuda);
  io.list(e.dataloaders, [](auto& io, auto& d) {
    io.num(d.num_workers);
    io.num(d.batch_size);
    io.flag(d.pin_memory);
    io.flag(d.persistent_workers);
    io.num(d.prefetch_factor);
    io.str(d.dataset_type);
    io.str(d.created_at);
  });
  io.list(e.optimizers, [](auto& io, auto& o) {
    io.str(o.type);
    io.num(o.param_tensors);
    io.flag(o.foreach);
  });
}

template <typename IO, typename R>
void threads_fields(IO& io, R& run) {
  io.list(run.threads, [](auto& io, auto& t) {
    io.num(t.os_tid);
    io.str(t.name);
  });
}

template <typename IO, typename R>
void stacks_fields(IO& io, R& run) {
  io.list(run.stacks, [&run](auto& io, auto& s) {
    io.index(s.thread_index, run.threads.size(), "stack thread");
    io.list(s.frames, [&run](auto& io, auto& f) { io.index(f, run.python.size(), "stack frame"); });
    io.num(s.samples);
    io.num(s.weight_ns);
  });
  io.num(run.python_samples);
}

template <typename IO, typename R>
void timeline_fields(IO& io, R& run) {
  io.list(run.timeline, [&run](auto& io, auto& ev) {
    io.num(ev.start_ns);
    io.num(ev.end_ns);
    io.num(ev.seq_nr);
    io.num(ev.forward_tid);
    io.index(ev.name_id, run.strings.size(), "event name");
    io.index(ev.thread_index, run.threads.size(), "event thread");
    io.op_kind(ev.kind);
    io.num(ev.depth);
  });
  io.num(run.main_thread);
  io.check([&run] { return thread_in_range(run, run.main_thread); }, "the main thread index is out of range");
  io.num(run.dropped_events);
}

template <typename IO, typename R>
void steps_fields(IO& io, R& run) {
  io.str(run.detail_mode);
  io.list(run.detail_spans, [](auto& io, auto& d) {
    io.num(d.first);
    io.num(d.second);
  });
  io.list(run.step_clocks, [&run](auto& io, auto& c) {
    io.num(c.t_ns);
    io.num(c.cpu_ns);
    io.num(c.runqueue_ns);
    io.num(c.thread_index);
    io.num(c.step);
    io.num(c.data_ns);
    io.check([&] { return thread_in_range(run, c.thread_index); }, "a step clock's thread is out of range");
  });
  io.num(run.data_wait_ns);
  io.num(run.data_wait_cpu_ns);
  io.num(run.data_wait_runqueue_ns);
}

template <typename IO, typename R>
void modules_fields(IO& io, R& run) {
  io.list(run.modules, [](auto& io, auto& m) {
    io.str(m.name);
    io.str(m.type);
    io.num(m.params);
    io.num(m.parent);
    io.flag(m.compiled);
    io.str(m.config);
    io.num(m.trainable_params);
  });
  io.check(
      [&run] {
        const auto n = static_cast<int64_t>(run.modules.size());
        for (const auto& m : run.modules)
          if (m.parent < -1 || m.parent >= n) return false;
        return true;
      },
      "a module parent is out of range");
  io.list(run.module_events, [&run](auto& io, auto& m) {
    io.num(m.t_ns);
    io.index(m.module, run.modules.size(), "module event");
    io.index(m.thread_index, run.threads.size(), "module event thread");
    io.num(m.is_exit);
  });
  io.num(run.dropped_module_events);
}

template <typename IO, typename R>
void samples_fields(IO& io, R& run) {
  io.list(run.samples, [&run](auto& io, auto& x) {
    io.num(x.t_ns);
    io.index(x.thread_index, run.threads.size(), "sample thread");
    io.num(x.stack);
    io.check([&] { return x.stack == PySample::kNoStack || x.stack < run.stacks.size(); },
             "a sample's stack is out of range");
    io.num(x.weight_ns);
  });
  io.num(run.dropped_samples);
}

template <typename IO, typename R>
void py_frames_fields(IO& io, R& run) {
  io.list(run.py_frames, [&run](auto& io, auto& f) {
    io.num(f.start_ns);
    io.num(f.end_ns);
    io.index(f.function, run.python.size(), "python frame function");
    io.index(f.thread_index, run.threads.size(), "python frame thread");
    io.num(f.depth);
  });
  io.num(run.dropped_py_frames);
}

template <typename IO, typename R>
void gc_totals_fields(IO& io, R& t) {
  io.num(t.collections);
  io.num(t.total_ns);
  io.num(t.max_ns);
  for (int i = 0; i < GcTotals::kGenerations; ++i) {
    io.num(t.by_generation[i]);
    io.num(t.ns_by_generation[i]);
  }
  io.num(t.collected);
  io.num(t.dropped);
}

template <typename IO, typename R>
void memory_and_gc_fields(IO& io, R& run) {
  io.list(run.memory, [](auto& io, auto& m) {
    io.num(m.t_ns);
    io.num(m.rss_bytes);
    io.num(m.torch_allocated_bytes);
  });
  io.num(run.memory_interval_ns);
  io.list(run.gc_pauses, [](auto& io, auto& g) {
    io.num(g.start_ns);
    io.num(g.end_ns);
    io.num(g.generation);
    io.check([&g] { return g.generation >= 0 && g.generation < GcTotals::kGenerations; },
             "a GC generation is out of range");
    io.num(g.collected);
  });
  gc_totals_fields(io, run.gc);
  io.flag(run.gc_observed);
  io.list(run.growing_graphs, [](auto& io, auto& g) {
    io.str(g.variable);
    io.str(g.scope);
    io.str(g.file);
    io.num(g.line);
    io.str(g.code);
    io.num(g.nodes_first);
    io.num(g.nodes_last);
    io.num(g.nodes_cap);
    io.num(g.step_first);
    io.num(g.step_last);
    io.flag(g.kept);
  });
}

template <typename IO, typename R>
void nvml_fields(IO& io, R& run) {
  io.list(run.nvml_devices, [](auto& io, auto& d) {
    io.num(d.nvml_index);
    io.str(d.name);
    io.str(d.uuid);
    io.num(d.mem_total_bytes);
    io.num(d.lost_t_ns);
  });
  io.list(run.nvml, [&run](auto& io, auto& s) {
    io.num(s.t_ns);
    io.index(s.device, run.nvml_devices.size(), "NVML sample device");
    io.num(s.gpu_util_pct);
    io.num(s.mem_util_pct);
    io.num(s.sm_clock_mhz);
    io.num(s.mem_used_bytes);
    io.num(s.power_mw);
  });
  io.num(run.nvml_interval_ns);
}

template <typename IO, typename R>
void gpu_window_fields(IO& io, R& run) {
  auto& g = run.gpu_window;
  io.str(g.mode);
  io.name(g.state, gpu_window_state_from_string);
  io.str(g.note);
  io.str(g.trace_path);
  io.strs(g.activities);
  io.num(g.requested_steps);
  io.num(g.first_step);
  io.num(g.last_step);
  io.num(g.start_ns);
  io.num(g.end_ns);
  io.num(g.clock_offset_ns);
  io.num(g.aligned_ops);
  io.num(g.alignment_correction_ns);
  io.num(g.alignment_residual_ns);
  numbers_fields(io, g.cuda_peak_allocated);
  numbers_fields(io, g.cuda_peak_reserved);
}

template <typename IO, typename R>
void experiments_fields(IO& io, R& run) {
  io.list(run.experiments, [](auto& io, auto& e) {
    io.str(e.setting);
    io.name(e.state, experiment_state_from_string);
    io.str(e.applied);
    io.str(e.note);
    io.num(e.rounds);
    io.num(e.warmup_steps);
    numbers_fields(io, e.baseline_ns);
    numbers_fields(io, e.try_ns);
  });
}

template <typename IO, typename R>
void rank_fields(IO& io, R& run) {
  auto& k = run.rank;
  io.num(k.rank);
  io.num(k.world_size);
  io.num(k.local_rank);
  io.str(k.backend);
  io.str(k.host);
  io.str(k.job);
  io.list(run.collectives, [&run](auto& io, auto& c) {
    io.num(c.start_ns);
    io.num(c.end_ns);
    io.num(c.bytes);
    io.index(c.name_id, run.strings.size(), "collective name");
    io.index(c.thread_index, run.threads.size(), "collective thread");
  });
  io.num(run.dropped_collectives);
}

// Every section, in the order they are stored: visit(name, fields), fields
// a callable (IO&, Run&). A section's indices are checked against the
// sections before it (threads, Python functions, strings, stacks, modules).
template <typename Visit>
void for_each_section(Visit&& visit) {
  visit("run", [](auto& io, auto& run) { run_info_fields(io, run); });
  visit("environment", [](auto& io, auto& run) { env_fields(io, run); });
  visit("threads", [](auto& io, auto& run) { threads_fields(io, run); });
  visit("python", [](auto& io, auto& run) { functions_fields(io, run.python); });
  visit("stacks", [](auto& io, auto& run) { stacks_fields(io, run); });
  visit("ops", [](auto& io, auto& run) { ops_fields(io, run.ops, run.threads.size()); });
  visit("strings", [](auto& io, auto& run) { io.strs(run.strings); });
  visit("timeline", [](auto& io, auto& run) { timeline_fields(io, run); });
  visit("steps", [](auto& io, auto& run) { steps_fields(io, run); });
  visit("modules", [](auto& io, auto& run) { modules_fields(io, run); });
  visit("notes", [](auto& io, auto& run) { io.strs(run.notes); });
  visit("processes", [](auto& io, auto& run) { processes_fields(io, run.processes); });
  visit("worker python", [](auto& io, auto& run) { functions_fields(io, run.worker_python); });
  // Other processes' threads are not in this run: their indices are not checked.
  visit("worker ops", [](auto& io, auto& run) { ops_fields(io, run.worker_ops, SIZE_MAX); });
  visit("samples", [](auto& io, auto& run) { samples_fields(io, run); });
  visit("python frames", [](auto& io, auto& run) { py_frames_fields(io, run); });
  visit("memory and gc", [](auto& io, auto& run) { memory_and_gc_fields(io, run); });
  visit("nvml", [](auto& io, auto& run) { nvml_fields(io, run); });
  visit("gpu window", [](auto& io, auto& run) { gpu_window_fields(io, run); });
  visit("experiments", [](auto& io, auto& run) { experiments_fields(io, run); });
  visit("rank", [](auto& io, auto& run) { rank_fields(io, run); });
}

}  // namespace

void encode_sections(Writer& w, const Run& run) {
  uint32_t index = 0;
  for_each_section([&](const char*, auto fields) {
    w.begin_section(index++);
    Encode io(w);
    fields(io, run);
    w.end_section();
  });
}

void decode_sections(Input& in, Run& run) {
  uint32_t index = 0;
  for_each_section([&](const char* name, auto fields) {
    const SectionBytes bytes = read_section(in, index++, name);
    Reader r(bytes, name);
    Decode io(r);
    fields(io, run);
    if (!r.done()) r.fail("unexpected bytes after its last field");
  });
}

std::string spill_layout() {
  Layout io;
  const Run run;
  for_each_section([&](const char* name, auto fields) {
    io.section(name);
    fields(io, run);
  });
  return io.text();
}

}  // namespace torchneck::run_io_detail
