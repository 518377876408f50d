// The Python extension `torchneck._torchneck`: start/stop one profiling
// session and hand back the written report. No per-event crossing: the
// collectors run in C++ and Python only configures, stops and describes the
// run and its environment (RunFacts, bindings/facts.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <malloc.h>
#include <pthread.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "bindings/collectors.h"
#include "collect/python/module_scopes.h"
#include "collect/torch/op_observer.h"
#include "bindings/facts.h"
#include "core/timing.h"
#include "bindings/output_dir_binding.h"
#include "bindings/report_for_python.h"
#include "bindings/spiller.h"
#include "core/clock.h"
#include "core/interner.h"
#include "core/threads.h"
#include "core/timeline_window.h"
#include "model/run.h"
#include "model/run_io.h"
#include "pipeline/pipeline.h"

namespace py = pybind11;

namespace torchneck {
namespace {

// The report settings Python hands over by name (options.report_settings):
// {"top": 15, "trace_steps": 5}; a name ReportSettings does not have is a
// ValueError, a value of another type a TypeError.
ReportSettings report_settings(const py::dict& given) {
  ReportSettings s;
  size_t known = 0;
  s.each([&](const char* name, auto& member, long, long) {
    if (!given.contains(name)) return;
    member = given[name].template cast<std::decay_t<decltype(member)>>();
    ++known;
  });
  if (known != given.size()) throw py::value_error("a report setting ReportSettings does not have");
  return s;
}

PipelineOptions pipeline_options(const std::string& dir, const std::string& cwd, const ReportSettings& settings) {
  PipelineOptions o;
  o.dir = dir;
  o.cwd = cwd;
  o.settings = settings;
  return o;
}

struct SessionOptions {
  CollectorOptions collect;
  int64_t timeline_steps = 0;  // 0: no limit in steps (core/timeline_window.h)
  ReportSettings settings;
};

// Drives the collectors (collect/collector.h for the order it keeps): start
// in list order; stop, snapshot, collect and discard in the reverse order.
class Session {
 public:
  explicit Session(SessionOptions o) : o_(std::move(o)) {
    if (o_.collect.sample_hz < 1 || o_.collect.sample_hz > 10000)
      throw std::invalid_argument("sample_hz must be between 1 and 10000");
    collectors_ = make_collectors(o_.collect);
  }

  void start() {
    if (started_) throw std::runtime_error("session already started");
    main_tid_ = current_os_tid();
    start_ns_ = now_ns();
    timeline_window().reset(o_.timeline_steps);
    if (pthread_getcpuclockid(pthread_self(), &main_cpu_clock_) == 0) {
      main_cpu0_ = cpu_seconds();
    } else {
      main_cpu0_ = -1;
    }
    for (size_t i = 0; i < collectors_.size();) {
      std::string error;
      if (collectors_[i]->start(&error)) {
        ++i;
      } else if (!collectors_[i]->required()) {
        notes_.push_back(error);  // its part is missing, the rest of the profile stands
        collectors_.erase(collectors_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        for (size_t j = i; j-- > 0;) collectors_[j]->stop();
        collectors_.clear();
        throw std::runtime_error(error);
      }
    }
    started_ = true;
  }

  // Periodic spills into out_dir and the fatal-signal report (spiller.h).
  // After start(); the GIL is held.
  void start_spill(const std::string& out_dir, const std::string& cwd, double first_s, double max_interval_s,
                   bool crash_handler) {
    if (!started_ || stopped_) throw std::runtime_error("start the session before its spills");
    SpillOptions so;
    so.dir = out_dir;
    so.cwd = cwd;
    so.settings = o_.settings;
    so.first_s = first_s;
    so.max_interval_s = max_interval_s;
    so.crash_handler = crash_handler;
    SpillSources src;
    src.python = [this](Run& run) {  // GIL held
      for (auto c = collectors_.rbegin(); c != collectors_.rend(); ++c)
        if ((*c)->python_side()) (*c)->snapshot(run, 0);
    };
    src.native = [this](Run& run, int64_t wait_ns) {  // without the GIL
      for (auto c = collectors_.rbegin(); c != collectors_.rend(); ++c)
        if (!(*c)->python_side() && !(*c)->snapshot(run, wait_ns))
          run.notes.push_back(std::string((*c)->name()) + ": no snapshot of its data could be taken");
      fill_threads_and_strings(run, main_tid_);
    };
    src.info = [this](Run& run) { fill_info(run); };
    start_spiller(so, std::move(src));
    spilling_ = true;
  }

  // What the script and its environment are, for spills. Called at start and
  // when the environment grows (a new DataLoader or optimizer).
  void set_info(const RunFacts& facts) {
    RunInfo ri = facts.run;
    ri.python_mode = o_.collect.python_mode;
    std::lock_guard<std::mutex> lock(info_mu_);
    info_ = std::move(ri);
    env_ = facts.env;
    rank_ = facts.rank;
    info_notes_ = facts.notes;
  }

  void stop() {
    if (spilling_) {  // first: the spill thread calls the collectors' snapshots
      stop_spiller();
      spilling_ = false;
    }
    if (!started_ || stopped_) return;
    for (auto c = collectors_.rbegin(); c != collectors_.rend(); ++c) (*c)->stop();
    stopped_ = true;
  }

  // Collects, merges the DataLoader workers' profiles found in
  // out_dir/workers, then writes profile.spill, profile.json (+
  // python.pstats, report.txt) into out_dir. Returns (report text, None), or
  // (report text, one-line error) when a file could not be written: the
  // report is shown even when the disk is full. Both as shown_text makes
  // them: a folder that is not UTF-8 is named in them.
  py::tuple finish(const RunFacts& facts, const std::string& out_dir, const std::string& cwd) {
    timing_phase("finish");
    Run run = collect(facts);
    timing_phase("collect", 2);
    std::string text, error;
    {
      py::gil_scoped_release nogil;
      Source source = live_source(std::move(run), out_dir);
      // The whole run, for `torchneck report DIR` (and in place of the last
      // periodic spill, which it supersedes), before it is analysed.
      if (!out_dir.empty()) {
        try {
          save_run(source.set.primary(), out_dir + "/profile.spill");
        } catch (const std::runtime_error& e) {
          error = e.what();
        }
        timing_phase("profile.spill", 2);
      }
      std::string write_error;
      text = report(source, pipeline_options(out_dir, cwd, o_.settings), &write_error);
      if (error.empty()) error = write_error;
      release_source(std::move(source));
    }
    if (error.empty()) return py::make_tuple(shown_text(text), py::none());
    return py::make_tuple(shown_text(text), shown_text(error));
  }

  // The run's end built the whole run, its analysis and the files in
  // malloc's heap while the script's memory was still held (trace.json's
  // slices, the analysis' intervals: the trim below takes RSS down 17-21 MB
  // at tiny_ops' end, TORCHNECK_TIMING=1). Freed, that memory stays
  // resident under a trim threshold that never trims (the benchmarks pin it,
  // as a tuned training job may), and the interpreter's own teardown, which
  // follows and maps ~15 MB of its own, peaks on top of it. Given back here,
  // once: the script has ended, so the heap it shares is not reshaped under
  // its feet (during the run a trim would make its next tensors fault their
  // pages in afresh).
  static void release_source(Source source) {
    { Source gone = std::move(source); }
    malloc_trim(0);
    timing_phase("heap given back", 2);
  }

  // A DataLoader worker's end: its profile, unanalysed, to `path` (the
  // main process merges it). facts.process describes the worker.
  void save(const RunFacts& facts, const std::string& path) {
    Run run = collect(facts);
    py::gil_scoped_release nogil;
    save_run(run, path);
  }

  // In a forked child (a DataLoader worker under fork): stop what the parent
  // was collecting and drop its data, so that this process can profile itself.
  void discard() {
    spilling_ = false;
    forget_spiller();
    for (auto c = collectors_.rbegin(); c != collectors_.rend(); ++c) (*c)->discard();
    stopped_ = true;
  }

 private:
  // Stops the collectors and builds the Run from them and from what Python
  // says about the run and its environment.
  Run collect(const RunFacts& facts) {
    stop();
    Run run;
    run.run = facts.run;
    run.run.python_mode = o_.collect.python_mode;
    run.notes = facts.notes;
    if (facts.process) run.processes.push_back(*facts.process);
    run.env = facts.env;
    run.growing_graphs = facts.growing_graphs;
    run.gpu_window = facts.gpu_window;
    run.rank = facts.rank;
    run.notes.insert(run.notes.end(), notes_.begin(), notes_.end());
    const TimelineWindow& window = timeline_window();
    if (window.closed.load()) {
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    "timeline window: the first %lld step boundaries (--timeline-steps), closed %.1f s into the "
                    "run; %lld boundaries in all; later events are in the tables but not in the step breakdown",
                    static_cast<long long>(o_.timeline_steps), ns_to_s(window.closed_at_ns.load() - start_ns_),
                    static_cast<long long>(window.boundaries.load()));
      run.notes.push_back(buf);
    }
    for (auto c = collectors_.rbegin(); c != collectors_.rend(); ++c)
      if ((*c)->python_side()) (*c)->collect(run);
    py::gil_scoped_release nogil;
    for (auto c = collectors_.rbegin(); c != collectors_.rend(); ++c)
      if (!(*c)->python_side()) (*c)->collect(run);
    fill_threads_and_strings(run, facts.main_tid != 0 ? facts.main_tid : main_tid_);
    for (auto& t : run.threads) {
      auto it = facts.thread_names.find(t.os_tid);
      if (it != facts.thread_names.end()) t.name = it->second;
    }
    return run;
  }

  double cpu_seconds() const {
    struct timespec ts{};
    if (clock_gettime(main_cpu_clock_, &ts) != 0) return -1;
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  }

  // For spills, from the spill thread: the run so far. The lock is only
  // tried for a while: a crashing thread may have died holding it.
  void fill_info(Run& run) {
    std::unique_lock<std::mutex> lock(info_mu_, std::defer_lock);
    for (int i = 0; i < 100 && !lock.try_lock(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (lock.owns_lock()) {
      run.run = info_;
      run.env = env_;
      run.rank = rank_;
      run.notes.insert(run.notes.end(), info_notes_.begin(), info_notes_.end());
    }
    run.run.python_mode = o_.collect.python_mode;
    run.run.wall_s = ns_to_s(now_ns() - start_ns_);
    const double cpu = main_cpu0_ >= 0 ? cpu_seconds() : -1;
    run.run.main_thread_cpu_s = cpu >= 0 ? cpu - main_cpu0_ : -1;
    run.notes.insert(run.notes.end(), notes_.begin(), notes_.end());
    ProcessInfo main;  // for `torchneck report`, which merges the workers
    main.pid = ::getpid();
    main.role = ProcessRole::kMain;
    main.wall_s = run.run.wall_s;
    main.start_ns = start_ns_;
    main.busy_s = std::max(0.0, run.run.main_thread_cpu_s);
    run.processes = {main};
  }

  SessionOptions o_;
  // Chosen once from the options (make_collectors); after start(), the ones
  // that started. Not changed while the spill thread runs.
  std::vector<std::unique_ptr<Collector>> collectors_;
  std::vector<std::string> notes_;
  bool started_ = false;
  bool stopped_ = false;
  bool spilling_ = false;
  uint64_t main_tid_ = 0;
  int64_t start_ns_ = 0;
  clockid_t main_cpu_clock_{};
  double main_cpu0_ = -1;
  std::mutex info_mu_;
  RunInfo info_;
  EnvFacts env_;
  RankInfo rank_;
  std::vector<std::string> info_notes_;
};

// `torchneck report DIR` (and run --try's second report): the report again
// from DIR/profile.spill; `experiments`, when given, join the run first and
// the spill is saved with them.
std::string report_of_dir(const std::string& dir, const std::string& cwd, const ReportSettings& settings,
                          const std::vector<Experiment>* experiments) {
  Source source = spill_source(dir, experiments);
  return report(source, pipeline_options(dir, cwd, settings));
}

// A distributed job's folder (model/rank_folders.h): every rank's profile
// read back, the ranks compared, and the merged report written to BASE: the
// lowest rank's tables, the ranks' section and findings. STRICT: see
// load_rank_folders.
std::string report_of_ranks(const std::string& base, const std::string& cwd, const ReportSettings& settings,
                            bool strict) {
  Source source = rank_folders_source(base, strict);
  return report(source, pipeline_options(base, cwd, settings));
}

}  // namespace
}  // namespace torchneck

PYBIND11_MODULE(_torchneck, m) {
  using namespace torchneck;
  m.doc() = "torchneck's native core: collectors, analysis and reports";
  bind_output_dir(m);
  bind_facts(m);
  py::class_<Session>(m, "Session")
      .def(py::init([](const std::string& python_mode, double sample_hz, bool ops,
                       size_t timeline_events_per_thread, double shape_sample_prob, bool modules,
                       int64_t timeline_steps, const py::dict& report, int64_t memory_interval_ms,
                       bool gc, int64_t nvml_interval_ms, const std::string& detail) {
             // lockstep: windows on the fixed schedule of a rank (core/detail_window.h).
             if (detail != "window" && detail != "full" && detail != "lockstep")
               throw std::invalid_argument("detail must be \"window\", \"lockstep\" or \"full\"");
             if (memory_interval_ms < 0) throw std::invalid_argument("memory_interval_ms must be >= 0");
             if (nvml_interval_ms < 0) throw std::invalid_argument("nvml_interval_ms must be >= 0");
             SessionOptions o;
             o.timeline_steps = timeline_steps;
             o.settings = report_settings(report);
             o.collect.modules = modules;
             o.collect.python_mode = python_mode_from_string(python_mode);  // ValueError naming it
             o.collect.sample_hz = sample_hz;
             o.collect.ops = ops;
             o.collect.timeline_events_per_thread = timeline_events_per_thread;
             o.collect.shape_sample_prob = shape_sample_prob;
             o.collect.memory_interval_ms = memory_interval_ms;
             o.collect.gc = gc;
             o.collect.nvml_interval_ms = nvml_interval_ms;
             o.collect.detail_windows = detail != "full";
             o.collect.detail_lockstep_period = detail == "lockstep" ? kLockstepPeriod : 0;
             return new Session(o);
           }),
           py::arg("python_mode") = "sample", py::arg("sample_hz") = 200.0, py::arg("ops") = true,
           py::arg("timeline_events_per_thread") = size_t{1} << 19,
           py::arg("shape_sample_prob") = 0.05, py::arg("modules") = true,
           py::arg("timeline_steps") = 0, py::arg("report") = py::dict(),
           py::arg("memory_interval_ms") = 100, py::arg("gc") = true,
           py::arg("nvml_interval_ms") = 100, py::arg("detail") = "window")
      .def("start", &Session::start)
      .def(
          "start_spill",
          [](Session& s, const FsPath& out_dir, const FsPath& cwd, double first_s, double max_interval_s,
             bool crash_handler) { s.start_spill(out_dir.bytes, cwd.bytes, first_s, max_interval_s, crash_handler); },
          py::arg("out_dir"), py::arg("cwd"), py::arg("first_s") = 1.0, py::arg("max_interval_s") = 10.0,
          py::arg("crash_handler") = true)
      .def("set_info", &Session::set_info, py::arg("facts"))
      .def(
          "save", [](Session& s, const RunFacts& facts, const FsPath& path) { s.save(facts, path.bytes); },
          py::arg("facts"), py::arg("path"))
      .def("discard", &Session::discard)
      .def("stop", &Session::stop)
      .def("spill_soon", [](Session&) { spill_soon(); })
      .def(
          "finish",
          [](Session& s, const RunFacts& facts, const FsPath& out_dir, const FsPath& cwd) {
            return s.finish(facts, out_dir.bytes, cwd.bytes);
          },
          py::arg("facts"), py::arg("out_dir"), py::arg("cwd"));
  // `torchneck report DIR`: the full report again from DIR/profile.spill
  // (after a kill -9, a fatal signal, or to see it once more).
  m.def(
      "report_from_spill",
      [](const FsPath& dir, const FsPath& cwd, const py::dict& settings) {
        const ReportSettings s = report_settings(settings);
        return report_for_python([&] { return report_of_dir(dir.bytes, cwd.bytes, s, nullptr); });
      },
      py::arg("dir"), py::arg("cwd"), py::arg("settings") = py::dict());
  // run --try: the experiments join the run's spill (so `torchneck report
  // DIR` keeps them) and the report is written again with them.
  m.def(
      "report_with_experiments",
      [](const FsPath& dir, const FsPath& cwd, const std::vector<Experiment>& experiments, const py::dict& settings) {
        const ReportSettings s = report_settings(settings);
        return report_for_python([&] { return report_of_dir(dir.bytes, cwd.bytes, s, &experiments); });
      },
      py::arg("dir"), py::arg("cwd"), py::arg("experiments"), py::arg("settings") = py::dict());
  // A distributed job's folder: the ranks' reports merged into BASE.
  m.def(
      "report_ranks",
      [](const FsPath& base, const FsPath& cwd, const py::dict& settings, bool strict) {
        const ReportSettings s = report_settings(settings);
        return report_for_python([&] { return report_of_ranks(base.bytes, cwd.bytes, s, strict); });
      },
      py::arg("base"), py::arg("cwd"), py::arg("settings") = py::dict(), py::arg("strict") = true);
  // The launcher's own user scopes: torchneck::backward
  // (python/torchneck/backward_scope.py), torchneck::graph_watch
  // (python/torchneck/graph_watch.py).
  m.def("open_user_scope", [](const std::string& name) {
    return reinterpret_cast<uintptr_t>(open_user_scope(name.c_str()));
  });
  m.def("close_user_scope", [](uintptr_t scope) { close_user_scope(reinterpret_cast<void*>(scope)); });
  // At each optimizer step's end (python/torchneck/runner.py): the module
  // hooks follow the detail windows.
  m.def("sync_module_hooks", [] { sync_module_scopes_with_detail(); });
  // When the script joins a process group of more than one rank
  // (python/torchneck/this_rank.py): the detail windows follow a rank's fixed
  // schedule from then on.
  m.def("detail_lockstep", [] { detail_lockstep(kLockstepPeriod); });
  // The GPU window (python/torchneck/gpu_window.py): detail held on from
  // when a window is to come until it closes (core/detail_window.h).
  m.def("hold_detail", [](bool on) { detail_window().held.store(on, std::memory_order_relaxed); });
  // ... and sizes itself by the operator events a step ends (what Kineto
  // keeps one record of each, until its trace is exported).
  m.def("events_ended", [] { return op_observer_events_ended(); });
  m.def("set_current_thread_name", [](const std::string& name) {
    set_thread_name(current_thread_index(), name);
  });
}
