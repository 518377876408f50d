#include "report/profile_json.h"

#include "core/clock.h"
#include "report/json_writer.h"

namespace torchneck {
namespace {

void write_run(JsonWriter& w, const RunInfo& r) {
  w.key("run").begin_object();
  w.field("script", r.script);
  w.key("argv").begin_array();
  for (const auto& a : r.argv) w.value(a);
  w.end_array();
  w.field("exit_code", r.exit_code);
  w.field("wall_s", r.wall_s);
  w.field("python_mode", r.python_mode);
  w.end_object();
}

void write_env(JsonWriter& w, const EnvFacts& e) {
  w.key("env").begin_object();
  w.field("python", e.python);
  w.field("torch", e.torch);
  w.field("cpu_cores", e.cpu_cores);
  w.field("torch_threads", e.torch_threads);
  w.field("cuda", e.cuda);
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

void write_python(JsonWriter& w, const Run& run) {
  const bool sampled = run.run.python_mode == "sample";
  w.key("python").begin_array();
  for (const auto& f : run.python) {
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

void write_ops(JsonWriter& w, const Run& run) {
  w.key("ops").begin_array();
  for (const auto& op : run.ops) {
    w.begin_object();
    w.field("name", op.name);
    w.field("kind", op_kind_name(op.kind));
    w.field("calls", op.calls);
    w.field("self_ms", ns_to_ms(op.self_ns));
    w.field("total_ms", ns_to_ms(op.total_ns));
    w.key("shapes").begin_array();
    for (const auto& s : op.shapes) {
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

}  // namespace

std::string profile_json(const Run& run, const Summary& summary) {
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
  write_python(w, run);
  w.field("python_samples", run.python_samples);
  write_ops(w, run);
  w.key("totals").begin_object();
  w.field("op_self_ms", ns_to_ms(summary.op_self_ns));
  w.field("op_calls", summary.op_calls);
  w.field("backward_self_ms", ns_to_ms(summary.backward_self_ns));
  w.field("python_self_ms", ns_to_ms(summary.python_self_ns));
  w.end_object();
  w.field("timeline_events", static_cast<uint64_t>(run.timeline.size()));
  w.field("dropped_events", run.dropped_events);
  w.key("notes").begin_array();
  for (const auto& n : run.notes) w.value(n);
  w.end_array();
  w.end_object();
  std::string out = w.str();
  out += '\n';
  return out;
}

}  // namespace torchneck
