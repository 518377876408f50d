// Sections of the spill format (run_io.cc): resident memory and GC, NVML,
// the GPU window.
#include "model/run_io_codec.h"

namespace torchneck::run_io_detail {

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

void put_gpu_window(Writer& w, const GpuWindow& g) {
  w.str(g.mode);
  w.str(g.state);
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

void get_gpu_window(Reader& r, GpuWindow& g) {
  g.mode = r.str();
  g.state = r.str();
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
    w.str(e.state);
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
    e.state = r.str();
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
