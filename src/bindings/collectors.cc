#include "bindings/collectors.h"

#include "collect/python/gc_pauses.h"
#include "collect/python/module_scopes.h"
#include "collect/python/record_function_scopes.h"
#include "collect/python/sampler.h"
#include "collect/python/tracer.h"
#include "collect/system/memory_sampler.h"
#include "collect/system/nvml_sampler.h"
#include "collect/torch/cpu_allocator.h"
#include "collect/torch/op_observer.h"

namespace torchneck {
namespace {

// torch operators, backward nodes and user scopes (RecordFunction).
class OpCollector final : public Collector {
 public:
  explicit OpCollector(const CollectorOptions& o) {
    options_.timeline_events_per_thread = o.timeline_events_per_thread;
    options_.shape_sample_prob = o.shape_sample_prob;
    options_.detail_windows = o.detail_windows;
    options_.detail.lockstep_period = o.detail_lockstep_period;
  }
  const char* name() const override { return "operator observer"; }
  bool python_side() const override { return false; }
  bool start(std::string* error) override { return start_op_observer(options_, error); }
  void stop() override { stop_op_observer(); }
  bool snapshot(Run& run, int64_t wait_ns) override { return snapshot_op_observer(run, wait_ns); }
  void collect(Run& run) override { collect_op_observer(run); }
  void discard() override { discard_op_observer(); }

 private:
  OpObserverOptions options_;
};

// Python's record_function scopes recorded by the operator observer without
// a RecordFunction callback (collect/python/record_function_scopes.h), so
// that none is registered between detail windows. Without it (the class
// cannot be wrapped) the observer's light callback records them, with a note.
class RecordFunctionScopeCollector final : public Collector {
 public:
  const char* name() const override { return "record_function scopes"; }
  bool required() const override { return false; }
  bool python_side() const override { return true; }
  bool start(std::string* error) override {
    if (!start_record_function_scopes(error)) return false;
    python_scopes_covered(true);
    return true;
  }
  void stop() override {
    python_scopes_covered(false);
    stop_record_function_scopes();
  }
  bool snapshot(Run&, int64_t) override { return true; }  // its scopes are the observer's
  void collect(Run&) override {}
  void discard() override { stop_record_function_scopes(); }  // the observer's discard drops the rest
};

// nn.Module scopes: without them the layers table and the forward phase are
// missing, and the rest of the profile stands.
class ModuleScopeCollector final : public Collector {
 public:
  const char* name() const override { return "nn.Module scopes"; }
  bool required() const override { return false; }
  bool python_side() const override { return true; }
  bool start(std::string* error) override { return start_module_scopes(ModuleScopeOptions{}, error); }
  void stop() override { stop_module_scopes(); }
  bool snapshot(Run& run, int64_t) override {
    snapshot_module_scopes(run);
    return true;
  }
  void collect(Run& run) override { collect_module_scopes(run); }
  void discard() override {
    stop_module_scopes();
    Run dropped;
    collect_module_scopes(dropped);
  }
};

// Resident memory over the run, and torch's CPU allocator beside it; without
// the sampler the memory line and memory_creep are missing, and the rest of
// the profile stands; without the allocator count (another CPU allocator is
// installed) the samples have resident memory only, with a note.
class MemoryCollector final : public Collector {
 public:
  explicit MemoryCollector(const CollectorOptions& o) { options_.interval_ns = o.memory_interval_ms * 1'000'000; }
  const char* name() const override { return "memory sampler"; }
  bool required() const override { return false; }
  bool python_side() const override { return false; }
  bool start(std::string* error) override {
    counting_ = start_cpu_allocator_count(&allocator_note_);
    options_.torch_allocated = counting_ ? &cpu_allocator_bytes : nullptr;
    if (start_memory_sampler(options_, error)) return true;
    stop_allocator();
    return false;
  }
  void stop() override {
    stop_memory_sampler();
    stop_allocator();
  }
  bool snapshot(Run& run, int64_t wait_ns) override { return snapshot_memory_sampler(run, wait_ns); }
  void collect(Run& run) override {
    collect_memory_sampler(run);
    if (!allocator_note_.empty()) run.notes.push_back(allocator_note_);
  }
  // In a forked child the counting allocator stays in front (the child's
  // storages hold its deleter); only the parent's samples are dropped.
  void discard() override { discard_memory_sampler(); }

 private:
  void stop_allocator() {
    if (counting_) stop_cpu_allocator_count();
    counting_ = false;
  }
  MemorySamplerOptions options_;
  bool counting_ = false;
  std::string allocator_note_;
};

// The GPUs over the whole run from NVML. On a machine without NVML (no
// NVIDIA driver: the library is not there) or without a visible GPU it
// starts as nothing, without a note, so a CPU-only run's report is as
// before; NVML that is there but fails (no driver loaded) is a note.
class NvmlCollector final : public Collector {
 public:
  explicit NvmlCollector(const CollectorOptions& o) { options_.interval_ns = o.nvml_interval_ms * 1'000'000; }
  const char* name() const override { return "NVML sampler"; }
  bool required() const override { return false; }
  bool python_side() const override { return false; }
  bool start(std::string* error) override { return start_nvml_sampler(options_, error) != NvmlStart::kFailed; }
  void stop() override { stop_nvml_sampler(); }
  bool snapshot(Run& run, int64_t wait_ns) override { return snapshot_nvml_sampler(run, wait_ns); }
  void collect(Run& run) override { collect_nvml_sampler(run); }
  void discard() override { discard_nvml_sampler(); }

 private:
  NvmlSamplerOptions options_;
};

// The interpreter's garbage collections (gc.callbacks).
class GcPauseCollector final : public Collector {
 public:
  const char* name() const override { return "GC pauses"; }
  bool required() const override { return false; }
  bool python_side() const override { return true; }
  bool start(std::string* error) override { return start_gc_pauses(GcPauseOptions{}, error); }
  void stop() override { stop_gc_pauses(); }
  bool snapshot(Run& run, int64_t) override {
    snapshot_gc_pauses(run);
    return true;
  }
  void collect(Run& run) override { collect_gc_pauses(run); }
  void discard() override {
    Run dropped;
    collect_gc_pauses(dropped);
  }
};

class SamplerCollector final : public Collector {
 public:
  explicit SamplerCollector(const CollectorOptions& o) {
    options_.hz = o.sample_hz;
    options_.timeline_samples = o.timeline_events_per_thread;  // --timeline-events bounds samples too
  }
  const char* name() const override { return "Python sampler"; }
  bool python_side() const override { return true; }
  bool start(std::string* error) override { return start_sampler(options_, error); }
  void stop() override { stop_sampler(); }
  bool snapshot(Run& run, int64_t) override {
    snapshot_sampler(run);
    return true;
  }
  void collect(Run& run) override { collect_sampler(run); }
  void discard() override {
    stop_sampler();
    Run dropped;
    collect_sampler(dropped);
  }

 private:
  SamplerOptions options_;
};

class TracerCollector final : public Collector {
 public:
  explicit TracerCollector(const CollectorOptions& o) {
    options_.timeline_events_per_thread = o.timeline_events_per_thread;
  }
  const char* name() const override { return "Python tracer"; }
  bool python_side() const override { return true; }
  bool start(std::string* error) override { return start_tracer(options_, error); }
  void stop() override { stop_tracer(); }
  bool snapshot(Run& run, int64_t) override {
    snapshot_tracer(run);
    return true;
  }
  void collect(Run& run) override { collect_tracer(run); }
  void discard() override {
    stop_tracer();
    Run dropped;
    collect_tracer(dropped);
  }

 private:
  TracerOptions options_;
};

}  // namespace

std::vector<std::unique_ptr<Collector>> make_collectors(const CollectorOptions& o) {
  std::vector<std::unique_ptr<Collector>> list;
  if (o.ops) list.push_back(std::make_unique<OpCollector>(o));
  if (o.ops) list.push_back(std::make_unique<RecordFunctionScopeCollector>());
  if (o.memory_interval_ms > 0) list.push_back(std::make_unique<MemoryCollector>(o));
  if (o.nvml_interval_ms > 0) list.push_back(std::make_unique<NvmlCollector>(o));
  if (o.modules) list.push_back(std::make_unique<ModuleScopeCollector>());
  if (o.gc) list.push_back(std::make_unique<GcPauseCollector>());
  switch (o.python_mode) {
    case PythonMode::kSample: list.push_back(std::make_unique<SamplerCollector>(o)); break;
    case PythonMode::kTrace: list.push_back(std::make_unique<TracerCollector>(o)); break;
    case PythonMode::kOff: break;
  }
  return list;
}

}  // namespace torchneck
