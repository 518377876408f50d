#include "model/run_io.h"

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <stdexcept>

#include "core/files.h"
#include "model/run_io_codec.h"

namespace torchneck {
namespace {

using namespace run_io_detail;  // NOLINT: the codec and the sections of run_io_sections.cc

constexpr char kMagic[8] = {'T', 'N', 'K', 'S', 'P', 'I', 'L', 'L'};
// 2: processes, worker_python, worker_ops; 3: samples, py_frames; 4: sample
// weights; 5: compiled modules; 6: memory samples, GC pauses and totals,
// growing autograd graphs, the data wait's CPU time; 7: NVML devices and
// samples; 8: the GPU window; 9: growing graphs kept or rebuilt, --try
// experiments; 11: detail windows; 12: step clocks.
constexpr uint32_t kVersion = 13;

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

// Thread indices are checked against `threads` (SIZE_MAX: not checked, for
// other processes' operators, whose threads are not in this run).
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

// An enum stored as its string (model/run_enums.h), so that the format does
// not depend on the enum's numbering; an unknown one is a load error.
template <typename FromString>
auto from_stored(Reader& r, FromString from_string) {
  const std::string s = r.str();
  try {
    return from_string(s);
  } catch (const std::invalid_argument& e) {
    r.fail(e.what());
  }
}

void put_processes(Writer& w, const std::vector<ProcessInfo>& ps) {
  w.num<uint64_t>(ps.size());
  for (const auto& p : ps) {
    w.num(p.pid);
    w.str(to_string(p.role));
    w.num(p.worker_id);
    w.str(p.start_method);
    w.num(p.wall_s);
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

}  // namespace

namespace {

void encode_into(Writer& w, const Run& run) {
  w.out.append(kMagic, sizeof kMagic);
  w.num(kVersion);
  const RunInfo& ri = run.run;
  w.str(ri.script);
  w.strs(ri.argv);
  w.num<int32_t>(ri.exit_code);
  w.num(ri.wall_s);
  w.num(ri.main_thread_cpu_s);
  w.num(ri.main_thread_runqueue_s);
  w.str(to_string(ri.python_mode));
  w.str(to_string(ri.ending));
  w.num(ri.start_unix_s);

  const EnvFacts& e = run.env;
  w.str(e.python);
  w.str(e.torch);
  w.num(e.cpu_cores);
  w.num(e.torch_threads);
  w.num<uint8_t>(e.cuda);
  w.num<uint64_t>(e.dataloaders.size());
  for (const auto& d : e.dataloaders) {
    w.num(d.num_workers);
    w.num(d.batch_size);
    w.num<uint8_t>(d.pin_memory);
    w.num<uint8_t>(d.persistent_workers);
    w.num(d.prefetch_factor);
    w.str(d.dataset_type);
    w.str(d.created_at);
  }
  w.num<uint64_t>(e.optimizers.size());
  for (const auto& o : e.optimizers) {
    w.str(o.type);
    w.num(o.param_tensors);
    w.num<uint8_t>(o.foreach);
  }

  w.num<uint64_t>(run.threads.size());
  for (const auto& t : run.threads) {
    w.num(t.os_tid);
    w.str(t.name);
  }
  put_functions(w, run.python);
  w.num<uint64_t>(run.stacks.size());
  for (const auto& s : run.stacks) {
    w.num(s.thread_index);
    w.num<uint64_t>(s.frames.size());
    for (uint32_t f : s.frames) w.num(f);
    w.num(s.samples);
    w.num(s.weight_ns);
  }
  w.num(run.python_samples);
  put_ops(w, run.ops);
  w.strs(run.strings);
  w.num<uint64_t>(run.timeline.size());
  for (const auto& ev : run.timeline) {
    w.num(ev.start_ns);
    w.num(ev.end_ns);
    w.num(ev.seq_nr);
    w.num(ev.forward_tid);
    w.num(ev.name_id);
    w.num(ev.thread_index);
    w.num<uint8_t>(static_cast<uint8_t>(ev.kind));
    w.num(ev.depth);
  }
  w.num(run.main_thread);
  w.num(run.dropped_events);
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
  w.strs(run.notes);
  put_processes(w, run.processes);
  put_functions(w, run.worker_python);
  put_ops(w, run.worker_ops);
  w.num<uint64_t>(run.samples.size());
  for (const auto& x : run.samples) {
    w.num(x.t_ns);
    w.num(x.thread_index);
    w.num(x.stack);
    w.num(x.weight_ns);
  }
  w.num(run.dropped_samples);
  w.num<uint64_t>(run.py_frames.size());
  for (const auto& f : run.py_frames) {
    w.num(f.start_ns);
    w.num(f.end_ns);
    w.num(f.function);
    w.num(f.thread_index);
    w.num(f.depth);
  }
  w.num(run.dropped_py_frames);
  put_memory_and_gc(w, run);
  put_nvml(w, run);
  put_gpu_window(w, run.gpu_window);
  put_experiments(w, run);
  put_rank(w, run);
  w.out.append(kMagic, sizeof kMagic);  // a trailer: the file is whole
}

}  // namespace

std::string encode_run(const Run& run) {
  Writer w;
  encode_into(w, run);
  return std::move(w.out);
}

Run decode_run(const std::string& bytes) {
  Reader r(bytes);
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    r.fail("not a torchneck spill file (bad magic)");
  for (size_t i = 0; i < sizeof kMagic; ++i) r.num<char>();
  const auto version = r.num<uint32_t>();
  if (version != kVersion)
    r.fail("spill format version " + std::to_string(version) + " is not the one this torchneck reads (" +
           std::to_string(kVersion) + ")");
  Run run;
  RunInfo& ri = run.run;
  ri.script = r.str();
  ri.argv = r.strs();
  ri.exit_code = r.num<int32_t>();
  ri.wall_s = r.num<double>();
  ri.main_thread_cpu_s = r.num<double>();
  ri.main_thread_runqueue_s = r.num<double>();
  ri.python_mode = from_stored(r, python_mode_from_string);
  ri.ending = from_stored(r, run_ending_from_string);
  ri.start_unix_s = r.num<double>();

  EnvFacts& e = run.env;
  e.python = r.str();
  e.torch = r.str();
  e.cpu_cores = r.num<int64_t>();
  e.torch_threads = r.num<int64_t>();
  e.cuda = r.boolean();
  e.dataloaders.resize(r.count(42));
  for (auto& d : e.dataloaders) {
    d.num_workers = r.num<int64_t>();
    d.batch_size = r.num<int64_t>();
    d.pin_memory = r.boolean();
    d.persistent_workers = r.boolean();
    d.prefetch_factor = r.num<int64_t>();
    d.dataset_type = r.str();
    d.created_at = r.str();
  }
  e.optimizers.resize(r.count(17));
  for (auto& o : e.optimizers) {
    o.type = r.str();
    o.param_tensors = r.num<int64_t>();
    o.foreach = r.boolean();
  }

  run.threads.resize(r.count(16));
  for (auto& t : run.threads) {
    t.os_tid = r.num<uint64_t>();
    t.name = r.str();
  }
  run.python = get_functions(r);
  run.stacks.resize(r.count(28));
  for (auto& s : run.stacks) {
    s.thread_index = r.index(run.threads.size(), "stack thread");
    s.frames.resize(r.count(4));
    for (auto& f : s.frames) f = r.index(run.python.size(), "stack frame");
    s.samples = r.num<uint64_t>();
    s.weight_ns = r.num<int64_t>();
  }
  run.python_samples = r.num<uint64_t>();
  run.ops = get_ops(r, run.threads.size());
  run.strings = r.strs();
  run.timeline.resize(r.count(42));
  for (auto& ev : run.timeline) {
    ev = OpEvent{};
    ev.start_ns = r.num<int64_t>();
    ev.end_ns = r.num<int64_t>();
    ev.seq_nr = r.num<int64_t>();
    ev.forward_tid = r.num<uint64_t>();
    ev.name_id = r.index(run.strings.size(), "event name");
    ev.thread_index = r.index(run.threads.size(), "event thread");
    ev.kind = op_kind(r);
    ev.depth = r.num<uint8_t>();
  }
  run.main_thread = r.num<uint32_t>();
  if (!run.threads.empty() && run.main_thread >= run.threads.size()) r.fail("the main thread index is out of range");
  run.dropped_events = r.num<uint64_t>();
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
  run.modules.resize(r.count(29));
  for (auto& m : run.modules) {
    m.name = r.str();
    m.type = r.str();
    m.params = r.num<int64_t>();
    m.parent = r.num<int32_t>();
    m.compiled = r.num<uint8_t>() != 0;
  }
  for (const auto& m : run.modules)
    if (m.parent < -1 || m.parent >= static_cast<int64_t>(run.modules.size())) r.fail("a module parent is out of range");
  run.module_events.resize(r.count(17));
  for (auto& m : run.module_events) {
    m = ModuleEvent{};
    m.t_ns = r.num<int64_t>();
    m.module = r.index(run.modules.size(), "module event");
    m.thread_index = r.index(run.threads.size(), "module event thread");
    m.is_exit = r.num<uint8_t>();
  }
  run.dropped_module_events = r.num<uint64_t>();
  run.notes = r.strs();
  run.processes = get_processes(r);
  run.worker_python = get_functions(r);
  run.worker_ops = get_ops(r, SIZE_MAX);
  run.samples.resize(r.count(24));
  for (auto& x : run.samples) {
    x.t_ns = r.num<int64_t>();
    x.thread_index = r.index(run.threads.size(), "sample thread");
    x.stack = r.num<uint32_t>();
    if (x.stack != PySample::kNoStack && x.stack >= run.stacks.size()) r.fail("a sample's stack is out of range");
    x.weight_ns = r.num<int64_t>();
  }
  run.dropped_samples = r.num<uint64_t>();
  run.py_frames.resize(r.count(28));
  for (auto& f : run.py_frames) {
    f.start_ns = r.num<int64_t>();
    f.end_ns = r.num<int64_t>();
    f.function = r.index(run.python.size(), "python frame function");
    f.thread_index = r.index(run.threads.size(), "python frame thread");
    f.depth = r.num<uint32_t>();
  }
  run.dropped_py_frames = r.num<uint64_t>();
  get_memory_and_gc(r, run);
  get_nvml(r, run);
  get_gpu_window(r, run.gpu_window);
  get_experiments(r, run);
  get_rank(r, run);
  for (size_t i = 0; i < sizeof kMagic; ++i)
    if (r.num<char>() != kMagic[i]) r.fail("the trailer is missing (the file was cut or corrupted)");
  if (!r.done()) r.fail("unexpected data after the trailer");
  return run;
}

void save_run(const Run& run, const std::string& path) {
  write_file_atomically(path, [&run](const std::function<void(std::string_view)>& sink) {
    Writer w(sink);
    encode_into(w, run);
    w.flush();
  });
}

Run load_run(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  bool ok = false;
  const std::string bytes = read_rest(f, &ok);
  std::fclose(f);
  if (!ok) throw std::runtime_error("cannot read " + path + ": read error");
  try {
    return decode_run(bytes);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace torchneck
