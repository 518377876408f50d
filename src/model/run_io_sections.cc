// The sections of the spill format (run_io.cc has the format, its order and
// the first sections: the run, its environment, threads, stacks, timeline).
#include "model/run_io_codec.h"

namespace torchneck::run_io_detail {

OpKind op_kind(Reader& r) {
  const auto k = r.num<uint8_t>();
  if (k >= kNumOpKinds) r.fail("an operator kind is unknown");
  return static_cast<OpKind>(k);
}

void put_functions(Writer& w, const std::vector<PyFunctionStats>& fs) {
  w.num<uint64_t>(fs.size());
  for (const auto& f : fs) {
    w.str(f.function);
    w.str(f.file);
    w.num<int32_t>(f.line);
    w.num<uint8_t>(f.builtin);
    w.num(f.calls);
    w.num(f.primitive_calls);
    w.num(f.self_ns);
    w.num(f.total_ns);
    w.num(f.self_samples);
    w.num(f.total_samples);
    w.num<uint64_t>(f.callers.size());
    for (const auto& c : f.callers) {
      w.num(c.caller);
      w.num(c.calls);
      w.num(c.primitive_calls);
      w.num(c.self_ns);
      w.num(c.total_ns);
    }
  }
}

std::vector<PyFunctionStats> get_functions(Reader& r) {
  std::vector<PyFunctionStats> fs(r.count(77));
  for (auto& f : fs) {
    f.function = r.str();
    f.file = r.str();
    f.line = r.num<int32_t>();
    f.builtin = r.boolean();
    f.calls = r.num<uint64_t>();
    f.primitive_calls = r.num<uint64_t>();
    f.self_ns = r.num<int64_t>();
    f.total_ns = r.num<int64_t>();
    f.self_samples = r.num<uint64_t>();
    f.total_samples = r.num<uint64_t>();
    f.callers.resize(r.count(36));
    for (auto& c : f.callers) {
      c.caller = r.num<uint32_t>();
      c.calls = r.num<uint64_t>();
      c.primitive_calls = r.num<uint64_t>();
      c.self_ns = r.num<int64_t>();
      c.total_ns = r.num<int64_t>();
    }
  }
  for (const auto& f : fs)
    for (const auto& c : f.callers)
      if (c.caller >= fs.size()) r.fail("a caller index is out of range");
  return fs;
}

void put_ops(Writer& w, const std::vector<OpStats>& ops) {
  w.num<uint64_t>(ops.size());
  for (const auto& o : ops) {
    w.str(o.name);
    w.num<uint8_t>(static_cast<uint8_t>(o.kind));
    w.num(o.calls);
    w.num(o.self_ns);
    w.num(o.total_ns);
    w.num<uint64_t>(o.shapes.size());
    for (const auto& s : o.shapes) {
      w.str(s.shapes);
      w.num(s.count);
    }
    w.num<uint64_t>(o.thread_indices.size());
    for (uint32_t t : o.thread_indices) w.num(t);
  }
}

std::vector<OpStats> get_ops(Reader& r, size_t threads) {
  std::vector<OpStats> ops(r.count(49));
  for (auto& o : ops) {
    o.name = r.str();
    o.kind = op_kind(r);
    o.calls = r.num<uint64_t>();
    o.self_ns = r.num<int64_t>();
    o.total_ns = r.num<int64_t>();
    o.shapes.resize(r.count(16));
    for (auto& s : o.shapes) {
      s.shapes = r.str();
      s.count = r.num<uint64_t>();
    }
    o.thread_indices.resize(r.count(4));
    for (auto& t : o.thread_indices) t = threads != SIZE_MAX ? r.index(threads, "operator thread") : r.num<uint32_t>();
  }
  return ops;
}

void put_processes(Writer& w, const std::vector<ProcessInfo>& ps) {
  w.num<uint64_t>(ps.size());
  for (const auto& p : ps) {
    w.num(p.pid);
    w.str(to_string(p.role));
    w.num(p.worker_id);
    w.str(p.start_method);
    w.num(p.wall_s);
    w.num(p.start_ns);
    w.num(p.busy_s);
    w.num(p.cpu_s);
    w.num(p.batches);
    w.num(p.batch_ns_max);
    w.num(p.op_calls);
    w.num(p.python_samples);
    w.strs(p.top_functions);
  }
}

std::vector<ProcessInfo> get_processes(Reader& r) {
  std::vector<ProcessInfo> ps(r.count(96));
  for (auto& p : ps) {
    p.pid = r.num<int64_t>();
    p.role = from_stored(r, process_role_from_string);
    p.worker_id = r.num<int64_t>();
    p.start_method = r.str();
    p.wall_s = r.num<double>();
    p.start_ns = r.num<int64_t>();
    p.busy_s = r.num<double>();
    p.cpu_s = r.num<double>();
    p.batches = r.num<uint64_t>();
    p.batch_ns_max = r.num<int64_t>();
    p.op_calls = r.num<uint64_t>();
    p.python_samples = r.num<uint64_t>();
    p.top_functions = r.strs();
  }
  return ps;
}


void put_steps(Writer& w, const Run& run) {
  w.str(run.detail_mode);
  w.num<uint64_t>(run.detail_spans.size());
  for (const auto& d : run.detail_spans) {
    w.num(d.first);
    w.num(d.second);
  }
  w.num<uint64_t>(run.step_clocks.size());
  for (const StepClock& c : run.step_clocks) {
    w.num(c.t_ns);
    w.num(c.cpu_ns);
    w.num(c.runqueue_ns);
    w.num(c.thread_index);
    w.num(c.step);
    w.num(c.data_ns);
  }
  w.num(run.data_wait_ns);
  w.num(run.data_wait_cpu_ns);
  w.num(run.data_wait_runqueue_ns);
}

void get_steps(Reader& r, Run& run) {
  run.detail_mode = r.str();
  run.detail_spans.resize(r.count(16));
  for (auto& d : run.detail_spans) {
    d.first = r.num<int64_t>();
    d.second = r.num<int64_t>();
  }
  run.step_clocks.resize(r.count(44));
  for (StepClock& c : run.step_clocks) {
    c.t_ns = r.num<int64_t>();
    c.cpu_ns = r.num<int64_t>();
    c.runqueue_ns = r.num<int64_t>();
    c.thread_index = r.num<uint32_t>();
    c.step = r.num<uint64_t>();
    c.data_ns = r.num<int64_t>();
    if (!run.threads.empty() && c.thread_index >= run.threads.size()) r.fail("a step clock's thread is out of range");
  }
  run.data_wait_ns = r.num<int64_t>();
  run.data_wait_cpu_ns = r.num<int64_t>();
  run.data_wait_runqueue_ns = r.num<int64_t>();
}

void put_modules(Writer& w, const Run& run) {
  w.num<uint64_t>(run.modules.size());
  for (const auto& m : run.modules) {
    w.str(m.name);
    w.str(m.type);
    w.num(m.params);
    w.num(m.parent);
    w.num<uint8_t>(m.compiled ? 1 : 0);
  }
  w.num<uint64_t>(run.module_events.size());
  for (const auto& m : run.module_events) {
    w.num(m.t_ns);
    w.num(m.module);
    w.num(m.thread_index);
    w.num(m.is_exit);
  }
  w.num(run.dropped_module_events);
}

void get_modules(Reader& r, Run& run) {
  run.modules.resize(r.count(29));
  for (auto& m : run.modules) {
    m.name = r.str();
    m.type = r.str();
    m.params = r.num<int64_t>();
    m.parent = r.num<int32_t>();
    m.compiled = r.num<uint8_t>() != 0;
  }
  for (const auto& m : run.modules)
    if (m.parent < -1 || m.parent >= static_cast<int64_t>(run.modules.size()))
      r.fail("a module parent is out of range");
  run.module_events.resize(r.count(17));
  for (auto& m : run.module_events) {
    m = ModuleEvent{};
    m.t_ns = r.num<int64_t>();
    m.module = r.index(run.modules.size(), "module event");
    m.thread_index = r.index(run.threads.size(), "module event thread");
    m.is_exit = r.num<uint8_t>();
  }
  run.dropped_module_events = r.num<uint64_t>();
}

void put_samples(Writer& w, const Run& run) {
  w.num<uint64_t>(run.samples.size());
  for (const auto& x : run.samples) {
    w.num(x.t_ns);
    w.num(x.thread_index);
    w.num(x.stack);
    w.num(x.weight_ns);
  }
  w.num(run.dropped_samples);
}

void get_samples(Reader& r, Run& run) {
  run.samples.resize(r.count(24));
  for (auto& x : run.samples) {
    x.t_ns = r.num<int64_t>();
    x.thread_index = r.index(run.threads.size(), "sample thread");
    x.stack = r.num<uint32_t>();
    if (x.stack != PySample::kNoStack && x.stack >= run.stacks.size()) r.fail("a sample's stack is out of range");
    x.weight_ns = r.num<int64_t>();
  }
  run.dropped_samples = r.num<uint64_t>();
}

void put_py_frames(Writer& w, const Run& run) {
  w.num<uint64_t>(run.py_frames.size());
  for (const auto& f : run.py_frames) {
    w.num(f.start_ns);
    w.num(f.end_ns);
    w.num(f.function);
    w.num(f.thread_index);
    w.num(f.depth);
  }
  w.num(run.dropped_py_frames);
}

void get_py_frames(Reader& r, Run& run) {
  run.py_frames.resize(r.count(28));
  for (auto& f : run.py_frames) {
    f.start_ns = r.num<int64_t>();
    f.end_ns = r.num<int64_t>();
    f.function = r.index(run.python.size(), "python frame function");
    f.thread_index = r.index(run.threads.size(), "python frame thread");
    f.depth = r.num<uint32_t>();
  }
  run.dropped_py_frames = r.num<uint64_t>();
}

void put_memory_and_gc(Writer& w, const Run& run) {
  w.num<uint64_t>(run.memory.size());
  for (const auto& m : run.memory) {
    w.num(m.t_ns);
    w.num(m.rss_bytes);
    w.num(m.torch_allocated_bytes);
  }
  w.num(run.memory_interval_ns);
  w.num<uint64_t>(run.gc_pauses.size());
  for (const auto& g : run.gc_pauses) {
    w.num(g.start_ns);
    w.num(g.end_ns);
    w.num(g.generation);
    w.num(g.collected);
  }
  const GcTotals& t = run.gc;
  w.num(t.collections);
  w.num(t.total_ns);
  w.num(t.max_ns);
  for (int i = 0; i < GcTotals::kGenerations; ++i) {
    w.num(t.by_generation[i]);
    w.num(t.ns_by_generation[i]);
  }
  w.num(t.collected);
  w.num(t.dropped);
  w.num<uint8_t>(run.gc_observed);
  w.num<uint64_t>(run.growing_graphs.size());
  for (const auto& g : run.growing_graphs) {
    w.str(g.variable);
    w.str(g.scope);
    w.str(g.file);
    w.num<int32_t>(g.line);
    w.str(g.code);
    w.num(g.nodes_first);
    w.num(g.nodes_last);
    w.num(g.nodes_cap);
    w.num(g.step_first);
    w.num(g.step_last);
    w.num<uint8_t>(g.kept);
  }
}

void get_memory_and_gc(Reader& r, Run& run) {
  run.memory.resize(r.count(24));
  for (auto& m : run.memory) {
    m.t_ns = r.num<int64_t>();
    m.rss_bytes = r.num<int64_t>();
    m.torch_allocated_bytes = r.num<int64_t>();
  }
  run.memory_interval_ns = r.num<int64_t>();
  run.gc_pauses.resize(r.count(28));
  for (auto& g : run.gc_pauses) {
    g.start_ns = r.num<int64_t>();
    g.end_ns = r.num<int64_t>();
    g.generation = r.num<int32_t>();
    if (g.generation < 0 || g.generation >= GcTotals::kGenerations) r.fail("a GC generation is out of range");
    g.collected = r.num<int64_t>();
  }
  GcTotals& t = run.gc;
  t.collections = r.num<uint64_t>();
  t.total_ns = r.num<int64_t>();
  t.max_ns = r.num<int64_t>();
  for (int i = 0; i < GcTotals::kGenerations; ++i) {
    t.by_generation[i] = r.num<uint64_t>();
    t.ns_by_generation[i] = r.num<int64_t>();
  }
  t.collected = r.num<int64_t>();
  t.dropped = r.num<uint64_t>();
  run.gc_observed = r.boolean();
  run.growing_graphs.resize(r.count(77));
  for (auto& g : run.growing_graphs) {
    g.variable = r.str();
    g.scope = r.str();
    g.file = r.str();
    g.line = r.num<int32_t>();
    g.code = r.str();
    g.nodes_first = r.num<int64_t>();
    g.nodes_last = r.num<int64_t>();
    g.nodes_cap = r.num<int64_t>();
    g.step_first = r.num<int64_t>();
    g.step_last = r.num<int64_t>();
    g.kept = r.boolean();
  }
}

void put_nvml(Writer& w, const Run& run) {
  w.num<uint64_t>(run.nvml_devices.size());
  for (const auto& d : run.nvml_devices) {
    w.num(d.nvml_index);
    w.str(d.name);
    w.str(d.uuid);
    w.num(d.mem_total_bytes);
    w.num(d.lost_t_ns);
  }
  w.num<uint64_t>(run.nvml.size());
  for (const auto& s : run.nvml) {
    w.num(s.t_ns);
    w.num(s.device);
    w.num(s.gpu_util_pct);
    w.num(s.mem_util_pct);
    w.num(s.sm_clock_mhz);
    w.num(s.mem_used_bytes);
    w.num(s.power_mw);
  }
  w.num(run.nvml_interval_ns);
}

void get_nvml(Reader& r, Run& run) {
  run.nvml_devices.resize(r.count(36));
  for (auto& d : run.nvml_devices) {
    d.nvml_index = r.num<int32_t>();
    d.name = r.str();
    d.uuid = r.str();
    d.mem_total_bytes = r.num<int64_t>();
    d.lost_t_ns = r.num<int64_t>();
  }
  run.nvml.resize(r.count(40));
  for (auto& s : run.nvml) {
    s.t_ns = r.num<int64_t>();
    s.device = r.index(run.nvml_devices.size(), "NVML sample device");
    s.gpu_util_pct = r.num<int32_t>();
    s.mem_util_pct = r.num<int32_t>();
    s.sm_clock_mhz = r.num<int32_t>();
    s.mem_used_bytes = r.num<int64_t>();
    s.power_mw = r.num<int64_t>();
  }
  run.nvml_interval_ns = r.num<int64_t>();
}

void put_gpu_window(Writer& w, const Run& run) {
  const GpuWindow& g = run.gpu_window;
  w.str(g.mode);
  w.str(to_string(g.state));
  w.str(g.note);
  w.str(g.trace_path);
  w.strs(g.activities);
  w.num(g.requested_steps);
  w.num(g.first_step);
  w.num(g.last_step);
  w.num(g.start_ns);
  w.num(g.end_ns);
  w.num(g.clock_offset_ns);
  w.num(g.aligned_ops);
  w.num(g.alignment_correction_ns);
  w.num(g.alignment_residual_ns);
  for (const std::vector<int64_t>* v : {&g.cuda_peak_allocated, &g.cuda_peak_reserved}) {
    w.num<uint64_t>(v->size());
    for (int64_t b : *v) w.num(b);
  }
}

void get_gpu_window(Reader& r, Run& run) {
  GpuWindow& g = run.gpu_window;
  g.mode = r.str();
  g.state = from_stored(r, gpu_window_state_from_string);
  g.note = r.str();
  g.trace_path = r.str();
  g.activities = r.strs();
  g.requested_steps = r.num<int64_t>();
  g.first_step = r.num<int64_t>();
  g.last_step = r.num<int64_t>();
  g.start_ns = r.num<int64_t>();
  g.end_ns = r.num<int64_t>();
  g.clock_offset_ns = r.num<int64_t>();
  g.aligned_ops = r.num<uint64_t>();
  g.alignment_correction_ns = r.num<int64_t>();
  g.alignment_residual_ns = r.num<int64_t>();
  for (std::vector<int64_t>* v : {&g.cuda_peak_allocated, &g.cuda_peak_reserved}) {
    v->resize(r.count(8));
    for (int64_t& b : *v) b = r.num<int64_t>();
  }
}

void put_experiments(Writer& w, const Run& run) {
  w.num<uint64_t>(run.experiments.size());
  for (const Experiment& e : run.experiments) {
    w.str(e.setting);
    w.str(to_string(e.state));
    w.str(e.applied);
    w.str(e.note);
    w.num(e.rounds);
    w.num(e.warmup_steps);
    for (const std::vector<int64_t>* v : {&e.baseline_ns, &e.try_ns}) {
      w.num<uint64_t>(v->size());
      for (int64_t d : *v) w.num(d);
    }
  }
}

void get_experiments(Reader& r, Run& run) {
  run.experiments.resize(r.count(48));
  for (Experiment& e : run.experiments) {
    e.setting = r.str();
    e.state = from_stored(r, experiment_state_from_string);
    e.applied = r.str();
    e.note = r.str();
    e.rounds = r.num<int64_t>();
    e.warmup_steps = r.num<int64_t>();
    for (std::vector<int64_t>* v : {&e.baseline_ns, &e.try_ns}) {
      v->resize(r.count(8));
      for (int64_t& d : *v) d = r.num<int64_t>();
    }
  }
}

void put_rank(Writer& w, const Run& run) {
  const RankInfo& k = run.rank;
  w.num(k.rank);
  w.num(k.world_size);
  w.num(k.local_rank);
  w.str(k.backend);
  w.str(k.host);
  w.str(k.job);
  w.num<uint64_t>(run.collectives.size());
  for (const CollectiveEvent& c : run.collectives) {
    w.num(c.start_ns);
    w.num(c.end_ns);
    w.num(c.bytes);
    w.num(c.name_id);
    w.num(c.thread_index);
  }
  w.num(run.dropped_collectives);
}

void get_rank(Reader& r, Run& run) {
  RankInfo& k = run.rank;
  k.rank = r.num<int64_t>();
  k.world_size = r.num<int64_t>();
  k.local_rank = r.num<int64_t>();
  k.backend = r.str();
  k.host = r.str();
  k.job = r.str();
  run.collectives.resize(r.count(32));
  for (CollectiveEvent& c : run.collectives) {
    c.start_ns = r.num<int64_t>();
    c.end_ns = r.num<int64_t>();
    c.bytes = r.num<int64_t>();
    c.name_id = r.index(run.strings.size(), "collective name");
    c.thread_index = r.index(run.threads.size(), "collective thread");
  }
  run.dropped_collectives = r.num<uint64_t>();
}

}  // namespace torchneck::run_io_detail
