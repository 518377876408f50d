// The merged, immutable picture of one profiled run: what every analysis and
// report reads. Built by the collectors at stop time (or, later, by ingest
// from a Kineto trace). Plain std types only: no Python, no ATen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/activity.h"
#include "model/run_enums.h"
#include "torchneck/records.h"

namespace torchneck {

struct DataLoaderFacts {
  int64_t num_workers = 0;
  int64_t batch_size = -1;  // -1: None (batch_sampler or batch_size=None)
  bool pin_memory = false;
  bool persistent_workers = false;
  int64_t prefetch_factor = -1;  // -1: None / not applicable (num_workers=0)
  std::string dataset_type;      // class name of the dataset
  std::string created_at;        // "file:line" in the user's script
};

struct OptimizerFacts {
  std::string type;        // "SGD", "Adam"
  int64_t param_tensors = 0;
  bool foreach = false;    // foreach=True requested
};

struct EnvFacts {
  std::string python;      // "3.11.2"
  std::string torch;       // "1.13.0a0"
  int64_t cpu_cores = 0;   // cores usable by the process (affinity)
  int64_t torch_threads = 0;
  bool cuda = false;
  std::vector<DataLoaderFacts> dataloaders;
  std::vector<OptimizerFacts> optimizers;
};

struct RunInfo {
  std::string script;             // path, or "-m module"
  std::vector<std::string> argv;  // the script's own sys.argv
  int exit_code = 0;
  double wall_s = 0;
  double main_thread_cpu_s = -1;  // CPU time of the main thread during the run, -1 unknown
  // Time the main thread was runnable but waiting for a CPU (other processes
  // or threads had the cores; Linux schedstat), -1 unknown. With the CPU
  // time it is the time the thread wanted a CPU: on a loaded machine, CPU
  // time alone would make computing look like waiting.
  double main_thread_runqueue_s = -1;
  // Every process's CPU time on the machine over the run, and the time the
  // hypervisor gave the machine's CPUs to other guests (/proc/stat), -1
  // unknown: less the job's own CPU time (this process's, every thread, and
  // its DataLoader workers' in Run::processes), what other work took.
  double process_cpu_s = -1;
  double machine_cpu_s = -1;
  double machine_steal_s = -1;
  PythonMode python_mode = PythonMode::kOff;  // how Python was profiled (model/run_enums.h)
  // How the run ended (model/run_enums.h): "finished", "exception",
  // "KeyboardInterrupt", "SIGTERM", "os._exit", "fatal signal SIGSEGV", or
  // "still running" for a periodic spill (the state the last spill saw).
  RunEnding ending;
  double start_unix_s = 0;        // wall-clock start, seconds since the epoch
};

struct ThreadInfo {
  uint64_t os_tid = 0;  // Linux thread id
  std::string name;     // Python thread name when known
};

// A caller edge, as pstats keeps it: how often `caller` called this function
// and the time spent in this function on those calls.
struct CallerEdge {
  uint32_t caller = 0;  // index into Run::python
  uint64_t calls = 0;
  uint64_t primitive_calls = 0;
  int64_t self_ns = 0;
  int64_t total_ns = 0;
};

// One Python function (or built-in C function) with cProfile's statistics
// (trace mode) or sample counts (sample mode).
struct PyFunctionStats {
  std::string function;  // "forward", or "<built-in method builtins.len>"
  std::string file;      // "~" for built-ins, as pstats writes them
  int line = 0;
  bool builtin = false;
  uint64_t calls = 0;            // total calls (trace mode)
  uint64_t primitive_calls = 0;  // calls that were not recursive
  int64_t self_ns = 0;           // time in the function itself
  int64_t total_ns = 0;          // including callees (outermost calls only)
  uint64_t self_samples = 0;     // sample mode
  uint64_t total_samples = 0;
  std::vector<CallerEdge> callers;
};

// A sampled Python stack: frames from outermost to innermost, as indices into
// Run::python, and how long the samples that saw it stood for.
struct SampledStack {
  uint32_t thread_index = 0;
  std::vector<uint32_t> frames;
  uint64_t samples = 0;
  int64_t weight_ns = 0;
};

// One sample of one thread's Python stack (sample mode), in time order: the
// sampler's timeline, kept in a bounded window (the aggregates in
// Run::python and Run::stacks always cover the whole run).
struct PySample {
  int64_t t_ns = 0;           // monotonic clock, as OpEvent
  uint32_t thread_index = 0;  // index into Run::threads
  uint32_t stack = kNoStack;  // index into Run::stacks; kNoStack when the stack was not kept
  int64_t weight_ns = 0;      // time this sample stands for (as SampledStack::weight_ns)
  static constexpr uint32_t kNoStack = 0xffffffffu;
};

// One completed Python call (trace mode), in a bounded window: the tracer's
// timeline, for trace.json.
struct PyFrameEvent {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t function = 0;      // index into Run::python
  uint32_t thread_index = 0;  // index into Run::threads
  uint32_t depth = 0;         // nesting depth on its thread
};

struct ShapeCount {
  std::string shapes;  // "[[32, 3, 32, 32], [16, 3, 3, 3]] float,float"
  uint64_t count = 0;
};

struct OpStats {
  std::string name;
  OpKind kind = OpKind::kOperator;
  uint64_t calls = 0;
  int64_t self_ns = 0;
  int64_t total_ns = 0;
  std::vector<ShapeCount> shapes;        // most frequent first, bounded
  std::vector<uint32_t> thread_indices;  // threads that ran it
};

// An nn.Module seen during the run.
struct ModuleInfo {
  std::string name;    // qualified, as model.named_modules() names it ("layer1.0.conv1")
  std::string type;    // class name ("Conv2d")
  int64_t params = 0;  // parameters, children included
  int32_t parent = -1; // index of the enclosing module in Run::modules, -1 for a root
  // torch.compile'd (the OptimizedModule wrapper, named and typed as the
  // module it wraps): its inside runs as compiled graphs, with no module
  // scopes of its own, so its time is its whole compiled region's.
  bool compiled = false;
  // Its extra_repr(), what print(model) shows in parentheses (bounded):
  // "in_features=4096, out_features=512, bias=True"; "" when unknown.
  std::string config = "";
  // Of params, those that require grad at the run's end (-1 unknown): a
  // module with parameters none of which trains is a frozen network (a
  // loss network, a teacher), whose no-grad calls are no evaluation.
  int64_t trainable_params = -1;
};

// One process of the run: the main one, or a DataLoader worker process
// (profiled in the worker, written to DIR/workers/, merged at the end).
struct ProcessInfo {
  int64_t pid = 0;
  ProcessRole role = ProcessRole::kMain;  // the main process, or a DataLoader worker
  int64_t worker_id = -1;    // DataLoader worker id, -1 for main
  std::string start_method;  // workers: "fork", or "spawn" (spawn/forkserver: nothing inherited)
  double wall_s = 0;         // profiled lifetime (workers: from their init to their exit)
  int64_t start_ns = 0;      // when that lifetime began, monotonic as OpEvent; 0 unknown
  double busy_s = 0;         // workers: producing batches (Dataset fetch + collate); main: CPU time of its main thread
  double cpu_s = -1;         // CPU time of the process over wall_s, -1 unknown
  uint64_t batches = 0;      // workers: batches produced
  int64_t batch_ns_max = 0;  // workers: slowest batch
  uint64_t op_calls = 0;     // torch operator calls in the process
  uint64_t python_samples = 0;
  std::vector<std::string> top_functions;  // hottest Python functions ("file:line(name)"), by self time
};

// The process's resident memory at one instant (the memory sampler's,
// every --memory-interval-ms). The sampler keeps a fixed number of samples:
// when its buffer fills it drops every other one and samples half as often,
// so the list always covers the whole run, at a resolution that halves as
// the run grows.
struct MemorySample {
  int64_t t_ns = 0;                    // monotonic clock, as OpEvent
  int64_t rss_bytes = 0;               // resident set (/proc/self/statm)
  int64_t torch_allocated_bytes = -1;  // torch's CPU allocator in use, -1 unknown
};

// One garbage collection by the interpreter (gc.callbacks), on the clock of
// OpEvent.
struct GcPause {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t generation = 0;  // 0, 1, 2
  int64_t collected = 0;   // unreachable objects found
  int64_t duration() const { return end_ns - start_ns; }
};

// Every collection of the run, also those beyond the bounded list.
struct GcTotals {
  static constexpr int kGenerations = 3;
  uint64_t collections = 0;
  int64_t total_ns = 0;
  int64_t max_ns = 0;
  uint64_t by_generation[kGenerations] = {0, 0, 0};
  int64_t ns_by_generation[kGenerations] = {0, 0, 0};
  int64_t collected = 0;
  uint64_t dropped = 0;  // pauses counted here but not kept in Run::gc_pauses
};

// The GPU window of a live run (python/torchneck/gpu_window.py): torch's
// profiler (Kineto, CPU and CUDA activities) over a few steady optimizer
// steps chosen while the script runs, its trace written into the output
// folder and read by the same ingest and GPU analyses as `torchneck
// analyze` (report time: the trace is a file, not part of the spill).
struct GpuWindow {
  std::string mode;   // --gpu: "auto", "on", "off"
  GpuWindowState state = GpuWindowState::kNone;
  std::string note;        // one line: why not recorded, or what was cut short
  std::string trace_path;  // absolute
  std::vector<std::string> activities;  // "cpu", "cuda"
  int64_t requested_steps = 0;  // --gpu-steps
  // Optimizer steps of the window, counted by the launcher from 1: the
  // window starts after step first_step - 1 and ends after last_step.
  int64_t first_step = 0, last_step = 0;
  int64_t start_ns = 0, end_ns = 0;  // monotonic, as OpEvent
  // Kineto's clock (system time, its trace's ts + baseTimeNanoseconds) to
  // ours: monotonic = kineto + clock_offset_ns, read at the window's start.
  int64_t clock_offset_ns = 0;
  // Filled when the trace is read (analyze/gpu/gpu_window.h, Alignment):
  // Kineto's operators matched to ours, the correction that moved the
  // window onto them (at its first operator), the stretch of Kineto's clock
  // taken out with it (per ns; 0: an offset alone), and the median distance
  // left. The stretch is not kept in the spill: every analysis reads the
  // trace and aligns it again.
  uint64_t aligned_ops = 0;
  int64_t alignment_correction_ns = 0;
  double alignment_stretch = 0.0;
  int64_t alignment_residual_ns = 0;
  // torch's CUDA caching allocator over the whole run, per device the
  // script used (torch.cuda.max_memory_allocated / max_memory_reserved at
  // its end); empty when CUDA was never initialised.
  std::vector<int64_t> cuda_peak_allocated, cuda_peak_reserved;
};

// A tensor of the user's script whose autograd graph grew between two looks
// of the launcher (python/torchneck/graph_watch.py): kept, what keeps every
// step's graph alive (`total_loss += loss`); or rebuilt each step, larger
// every time (a penalty over a list that grows: the step's work grows). A
// fact only Python can see.
struct GrowingGraph {
  std::string variable;  // "total_loss"
  std::string scope;     // the function it is a local of, "<module>" for a global of __main__
  std::string file;      // the line that accumulates into it, "" when not found
  int line = 0;
  std::string code;      // that line's source, stripped ("total_loss += loss")
  int64_t nodes_first = 0;  // autograd nodes reachable from its grad_fn at the first look
  int64_t nodes_last = 0;   // and at the last (a bounded walk: capped at nodes_cap)
  int64_t nodes_cap = 0;
  int64_t step_first = 0;  // optimizer steps taken at those looks
  int64_t step_last = 0;
  // The graph at the last look holds the one an earlier look saw; false:
  // rebuilt each step, larger every time (file, line and code then "").
  bool kept = true;
};

// One `run --try SETTING` experiment (python/torchneck/experiment.py):
// the script run again, unprofiled, for a bounded number of steps, with the
// setting applied and without it, interleaved (baseline, try, try,
// baseline: a drift of the machine cancels), each run stopped cleanly
// after its steps.
struct Experiment {
  std::string setting;  // "num_workers=4", "threads=2"
  ExperimentState state = ExperimentState::kNone;
  std::string applied;  // what was changed, and where ("DataLoader(num_workers=4) at train.py:40 (the script passes 0)")
  std::string note;     // why not, or what cut it short
  int64_t rounds = 0;   // baseline/try pairs run
  int64_t warmup_steps = 0;  // left out of each run's steps
  // Step durations (optimizer step to optimizer step) after each run's
  // warm-up, the runs' in the order they ran, baseline and try apart.
  std::vector<int64_t> baseline_ns, try_ns;
};

// A GPU sampled through NVML over the whole run (collect/system/nvml_sampler.h):
// those CUDA_VISIBLE_DEVICES names, in its order, else every GPU in NVML's
// order. "GPU k" in the reports is its index in Run::nvml_devices: torch's
// cuda:k when CUDA_VISIBLE_DEVICES is set; without it NVML's order is the
// PCI bus order, CUDA's too under CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA's
// default, fastest first, can differ on a machine of mixed GPUs).
struct NvmlDevice {
  int32_t nvml_index = 0;         // NVML's index of the device
  std::string name;               // "NVIDIA H200"
  std::string uuid;               // "GPU-5c1f..."
  int64_t mem_total_bytes = -1;   // -1 unknown
  int64_t lost_t_ns = -1;         // when NVML said the GPU was lost (NVML_ERROR_GPU_IS_LOST), -1 never
};

// One GPU at one instant (every --nvml-interval-ms, thinned by halving when
// its buffer fills, as MemorySample): -1 for a field whose NVML call failed.
struct NvmlSample {
  int64_t t_ns = 0;             // monotonic clock, as OpEvent and MemorySample
  uint32_t device = 0;          // index into Run::nvml_devices
  int32_t gpu_util_pct = -1;    // share of the last period a kernel ran (nvmlDeviceGetUtilizationRates)
  int32_t mem_util_pct = -1;    // share of it device memory was read or written
  int32_t sm_clock_mhz = -1;
  int64_t mem_used_bytes = -1;  // device memory in use, by every process
  int64_t power_mw = -1;
};

// A thread's clocks at the end of a step (a step boundary it ended:
// Optimizer.step, ProfilerStep), on the clock of OpEvent: its CPU time and
// its time runnable but waiting for a CPU, cumulative (Linux schedstat;
// runqueue_ns -1 where unreadable). The difference of two tells how a
// step's wall time split into computing, waiting for a core, and neither
// (blocked: a lock, I/O, a device; or a slower core). `step` counts the
// boundaries the thread has ended (1 at its first) and `data_ns` its time
// inside DataLoader fetches so far, both cumulative too: the clocks outlast
// the timeline (thinned, never full), and two of them tell the steps
// between them, their mean time and data wait, anywhere in a long run
// (analyze/run_clocks.h).
struct StepClock {
  int64_t t_ns = 0;
  int64_t cpu_ns = 0;
  int64_t runqueue_ns = -1;
  uint32_t thread_index = 0;
  uint64_t step = 0;
  int64_t data_ns = 0;
};

struct Run {
  RunInfo run;
  EnvFacts env;
  std::vector<ThreadInfo> threads;
  std::vector<PyFunctionStats> python;
  std::vector<SampledStack> stacks;
  uint64_t python_samples = 0;
  std::vector<PySample> samples;        // sample mode: the sampler's timeline window
  uint64_t dropped_samples = 0;         // thread samples not kept in it
  std::vector<PyFrameEvent> py_frames;  // trace mode: the tracer's timeline window, by start time
  uint64_t dropped_py_frames = 0;       // calls not kept in it
  std::vector<OpStats> ops;
  std::vector<OpEvent> timeline;  // bounded window of op events
  std::vector<std::string> strings;  // OpEvent::name_id → name
  uint32_t main_thread = 0;       // thread index of Python's main thread
  uint64_t dropped_events = 0;    // events not kept in the timeline window
  // Detail windows (core/detail_window.h, docs/overhead.md): "window" when
  // operators, backward nodes and module calls were recorded only in
  // detail_spans (user scopes throughout), "full" when throughout (one span),
  // "" for a run without the operator observer (an ingested trace, --no-ops).
  std::string detail_mode;
  std::vector<std::pair<int64_t, int64_t>> detail_spans;  // by time, [start, end)
  // At each step boundary, the ending thread's clocks (bounded: thinned to
  // every 2nd, 4th, ... boundary in a long run); by thread, then time.
  std::vector<StepClock> step_clocks;
  // The main thread's time inside DataLoader __next__ (all fetches), its
  // time there on a CPU (CLOCK_THREAD_CPUTIME_ID) and runnable waiting for
  // one (schedstat's run-queue wait), each at the fetches' ends; -1 when not
  // measured. Tells loading that computes from loading that waits (sleep,
  // I/O, workers' batches), on a busy host too: the waits for a core are
  // neither.
  int64_t data_wait_ns = -1;
  int64_t data_wait_cpu_ns = -1;
  int64_t data_wait_runqueue_ns = -1;
  std::vector<ModuleInfo> modules;
  std::vector<ModuleEvent> module_events;  // bounded window, sorted by time
  uint64_t dropped_module_events = 0;
  std::vector<std::string> notes;  // what a collector could not do, and why
  // Processes: empty for a run without worker processes; else the main
  // process first, then one entry per DataLoader worker process.
  std::vector<ProcessInfo> processes;
  // All workers together: Python functions (merged by file, line, name;
  // self_ns is the self time while producing batches, below the fetcher's
  // fetch(), see model/processes.cc) and torch operators (by name and kind).
  std::vector<PyFunctionStats> worker_python;
  std::vector<OpStats> worker_ops;
  // Who the run is in a distributed job (-1s when it is not, or unknown).
  RankInfo rank;
  // c10d collectives, in the order this process started them (records.h);
  // those past the collector's bound are counted, not kept.
  std::vector<CollectiveEvent> collectives;
  uint64_t dropped_collectives = 0;
  // The collectives' times are their device kernels' (a Kineto trace of
  // NCCL, ingest/kineto_to_run.h): what overlaps them is the rank's other
  // device work, not its host operators. Not part of the spill: live runs
  // record host times.
  bool collectives_on_device = false;
  // Device work and the host activity around it (model/activity.h): a
  // Kineto trace's, or a live run's GPU window; empty on a CPU-only run.
  Activities activities;
  // Resident memory over the run (model above), by time; empty when not
  // sampled (--memory-interval-ms=0, or an ingested trace).
  std::vector<MemorySample> memory;
  int64_t memory_interval_ns = 0;  // the sampler's period at the end of the run (it doubles when thinned)
  // Garbage collections: the first ones in a bounded list, all in gc.
  std::vector<GcPause> gc_pauses;
  GcTotals gc;
  bool gc_observed = false;  // gc.callbacks was watched (false: nothing known)
  std::vector<GrowingGraph> growing_graphs;
  std::vector<Experiment> experiments;  // run --try: the setting measured against the baseline
  GpuWindow gpu_window;  // mode empty: not a live run, or a launcher without it
  // The GPUs over the whole run from NVML (models above): empty on a machine
  // without NVML, with --nvml-interval-ms=0, and for an ingested trace.
  // Samples by time, the devices of one instant in device order.
  std::vector<NvmlDevice> nvml_devices;
  std::vector<NvmlSample> nvml;
  int64_t nvml_interval_ns = 0;  // the sampler's period at the end of the run (it doubles when thinned)
};

}  // namespace torchneck
