// The Python extension `torchneck._torchneck`: start/stop one profiling
// session and hand back the written report. No per-event crossing: the
// collectors run in C++ and Python only configures, stops and describes the
// environment.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <pthread.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "bindings/output_dir_binding.h"
#include "bindings/spiller.h"
#include "collect/python/module_scopes.h"
#include "collect/python/sampler.h"
#include "collect/python/tracer.h"
#include "collect/torch/op_observer.h"
#include "core/clock.h"
#include "core/interner.h"
#include "core/threads.h"
#include "core/timeline_window.h"
#include "model/processes.h"
#include "model/run.h"
#include "model/run_io.h"
#include "report/output_files.h"

namespace py = pybind11;

namespace torchneck {
namespace {

struct SessionOptions {
  std::string python_mode = "sample";  // "sample", "trace" or "off"
  double sample_hz = 200.0;
  bool ops = true;
  bool modules = true;  // nn.Module scopes for layers and the forward phase
  size_t timeline_events_per_thread = size_t{1} << 19;
  int64_t timeline_steps = 0;  // 0: no limit in steps (core/timeline_window.h)
  double shape_sample_prob = 0.05;
  int64_t trace_steps = kDefaultTraceSteps;  // trace.json's window (report/trace_json.h)
};

class Session {
 public:
  explicit Session(SessionOptions o) : o_(std::move(o)) {
    if (o_.python_mode != "sample" && o_.python_mode != "trace" && o_.python_mode != "off")
      throw std::invalid_argument("python_mode must be sample, trace or off");
    if (o_.sample_hz < 1 || o_.sample_hz > 10000)
      throw std::invalid_argument("sample_hz must be between 1 and 10000");
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
    std::string error;
    if (o_.ops) {
      OpObserverOptions oo;
      oo.timeline_events_per_thread = o_.timeline_events_per_thread;
      oo.shape_sample_prob = o_.shape_sample_prob;
      if (!start_op_observer(oo, &error)) throw std::runtime_error(error);
    }
    if (o_.modules && !start_module_scopes(ModuleScopeOptions{}, &error)) {
      notes_.push_back(error);  // layers missing, the rest of the profile stands
      o_.modules = false;
    }
    if (o_.python_mode == "trace") {
      TracerOptions to;
      to.timeline_events_per_thread = o_.timeline_events_per_thread;
      if (!start_tracer(to, &error)) throw std::runtime_error(error);
    } else if (o_.python_mode == "sample") {
      SamplerOptions so;
      so.hz = o_.sample_hz;
      so.timeline_samples = o_.timeline_events_per_thread;  // --timeline-events bounds samples too
      if (!start_sampler(so, &error)) throw std::runtime_error(error);
    }
    started_ = true;
  }

  // Periodic spills into out_dir and the fatal-signal report (spiller.h).
  // After start(); the GIL is held.
  void start_spill(const std::string& out_dir, const std::string& cwd, size_t top, double first_s,
                   double max_interval_s, bool crash_handler) {
    if (!started_ || stopped_) throw std::runtime_error("start the session before its spills");
    SpillOptions so;
    so.dir = out_dir;
    so.cwd = cwd;
    so.top = top;
    so.first_s = first_s;
    so.max_interval_s = max_interval_s;
    so.crash_handler = crash_handler;
    SpillSources src;
    src.python = [this](Run& run) {  // GIL held
      if (o_.python_mode == "trace") snapshot_tracer(run);
      else if (o_.python_mode == "sample") snapshot_sampler(run);
      if (o_.modules) snapshot_module_scopes(run);
    };
    src.native = [this](Run& run, int64_t wait_ns) {
      const bool ok = !o_.ops || snapshot_op_observer(run, wait_ns);
      fill_threads_and_strings(run, main_tid_);
      return ok;
    };
    src.info = [this](Run& run) { fill_info(run); };
    start_spiller(so, std::move(src));
    spilling_ = true;
  }

  // What the script and its environment are, for spills (run_info and env
  // as finish() takes them). Called at start and when the environment grows
  // (a new DataLoader or optimizer).
  void set_info(const py::dict& run_info, const py::dict& env) {
    RunInfo ri;
    ri.script = run_info["script"].cast<std::string>();
    ri.argv = run_info["argv"].cast<std::vector<std::string>>();
    ri.python_mode = o_.python_mode;
    if (run_info.contains("start_unix_s")) ri.start_unix_s = run_info["start_unix_s"].cast<double>();
    EnvFacts e;
    fill_env(e, env);
    std::vector<std::string> notes;
    if (run_info.contains("notes")) notes = run_info["notes"].cast<std::vector<std::string>>();
    std::lock_guard<std::mutex> lock(info_mu_);
    info_ = std::move(ri);
    env_ = std::move(e);
    info_notes_ = std::move(notes);
  }

  void stop() {
    if (spilling_) {
      stop_spiller();
      spilling_ = false;
    }
    if (!started_ || stopped_) return;
    if (o_.python_mode == "trace") stop_tracer();
    else if (o_.python_mode == "sample") stop_sampler();
    if (o_.ops) stop_op_observer();
    if (o_.modules) stop_module_scopes();
    stopped_ = true;
  }

  // Collects, merges the DataLoader workers' profiles found in
  // out_dir/workers, then writes profile.spill, profile.json (+
  // python.pstats, report.txt) into out_dir. Returns (report text, None), or
  // (report text, one-line error) when a file could not be written: the
  // report is shown even when the disk is full.
  py::tuple finish(const py::dict& run_info, const py::dict& env, const std::string& out_dir,
                   const std::string& cwd) {
    Run run = collect(run_info, env);
    const size_t top = run_info.contains("top") ? run_info["top"].cast<size_t>() : 15;
    const int64_t trace_steps =
        run_info.contains("trace_steps") ? run_info["trace_steps"].cast<int64_t>() : kDefaultTraceSteps;
    const int64_t pid = run.processes.empty() ? 0 : run.processes.front().pid;
    std::string text, error;
    {
      py::gil_scoped_release nogil;
      if (!out_dir.empty()) {
        const std::vector<Run> workers = load_worker_runs(out_dir, run.notes);
        if (!workers.empty()) {
          ProcessInfo main = run.processes.empty() ? ProcessInfo{} : run.processes.front();
          main.role = "main";
          merge_workers(run, main, workers);
        } else {
          run.processes.clear();
        }
      }
      // The whole run, for `torchneck report DIR` (and in place of the last
      // periodic spill, which it supersedes).
      if (!out_dir.empty()) {
        try {
          save_run(run, out_dir + "/profile.spill");
        } catch (const std::runtime_error& e) {
          error = e.what();
        }
      }
      OutputOptions out;
      out.dir = out_dir;
      out.cwd = cwd;
      out.summary.top_python = out.summary.top_ops = top;
      out.trace.steps = trace_steps;
      out.trace.pid = pid;
      std::string write_error;
      text = write_outputs(run, out, &write_error);
      if (error.empty()) error = write_error;
    }
    if (error.empty()) return py::make_tuple(text, py::none());
    return py::make_tuple(text, error);
  }

  // A DataLoader worker's end: its profile, unanalysed, to `path` (the
  // main process merges it). run_info["process"] describes the worker.
  void save(const py::dict& run_info, const py::dict& env, const std::string& path) {
    Run run = collect(run_info, env);
    py::gil_scoped_release nogil;
    save_run(run, path);
  }

  // In a forked child (a DataLoader worker under fork): stop what the parent
  // was collecting and drop its data, so that this process can profile itself.
  void discard() {
    spilling_ = false;
    forget_spiller();
    if (o_.python_mode == "trace") stop_tracer();
    else if (o_.python_mode == "sample") stop_sampler();
    if (o_.modules) stop_module_scopes();
    Run dropped;
    if (o_.python_mode == "trace") collect_tracer(dropped);
    else if (o_.python_mode == "sample") collect_sampler(dropped);
    if (o_.modules) collect_module_scopes(dropped);
    if (o_.ops) discard_op_observer();
    stopped_ = true;
  }

 private:
  // Stops the collectors and builds the Run from them and from what Python
  // says about the run (run_info) and its environment (env).
  Run collect(const py::dict& run_info, const py::dict& env) {
    stop();
    Run run;
    run.run.script = run_info["script"].cast<std::string>();
    run.run.argv = run_info["argv"].cast<std::vector<std::string>>();
    run.run.exit_code = run_info["exit_code"].cast<int>();
    run.run.wall_s = run_info["wall_s"].cast<double>();
    if (run_info.contains("main_thread_cpu_s")) run.run.main_thread_cpu_s = run_info["main_thread_cpu_s"].cast<double>();
    if (run_info.contains("main_thread_runqueue_s"))
      run.run.main_thread_runqueue_s = run_info["main_thread_runqueue_s"].cast<double>();
    run.run.python_mode = o_.python_mode;
    if (run_info.contains("ending")) run.run.ending = run_info["ending"].cast<std::string>();
    if (run_info.contains("start_unix_s")) run.run.start_unix_s = run_info["start_unix_s"].cast<double>();
    if (run_info.contains("notes")) run.notes = run_info["notes"].cast<std::vector<std::string>>();
    if (run_info.contains("process")) run.processes.push_back(process_info(run_info["process"].cast<py::dict>()));
    fill_env(run.env, env);
    std::map<uint64_t, std::string> thread_names;
    if (run_info.contains("thread_names"))
      thread_names = run_info["thread_names"].cast<std::map<uint64_t, std::string>>();
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
    if (o_.python_mode == "trace") collect_tracer(run);
    else if (o_.python_mode == "sample") collect_sampler(run);
    if (o_.modules) collect_module_scopes(run);
    const uint64_t main_tid = run_info.contains("main_tid") ? run_info["main_tid"].cast<uint64_t>() : 0;
    py::gil_scoped_release nogil;
    if (o_.ops) collect_op_observer(run);
    fill_threads_and_strings(run, main_tid != 0 ? main_tid : main_tid_);
    for (auto& t : run.threads) {
      auto it = thread_names.find(t.os_tid);
      if (it != thread_names.end()) t.name = it->second;
    }
    return run;
  }

  static ProcessInfo process_info(const py::dict& d) {
    ProcessInfo p;
    p.pid = d["pid"].cast<int64_t>();
    p.role = d["role"].cast<std::string>();
    if (d.contains("worker_id")) p.worker_id = d["worker_id"].cast<int64_t>();
    if (d.contains("start_method")) p.start_method = d["start_method"].cast<std::string>();
    p.wall_s = d["wall_s"].cast<double>();
    if (d.contains("busy_s")) p.busy_s = d["busy_s"].cast<double>();
    if (d.contains("cpu_s")) p.cpu_s = d["cpu_s"].cast<double>();
    if (d.contains("batches")) p.batches = d["batches"].cast<uint64_t>();
    if (d.contains("batch_ns_max")) p.batch_ns_max = d["batch_ns_max"].cast<int64_t>();
    return p;
  }

  static void fill_env(EnvFacts& e, const py::dict& env) {
    e.python = env["python"].cast<std::string>();
    e.torch = env["torch"].cast<std::string>();
    e.cpu_cores = env["cpu_cores"].cast<int64_t>();
    e.torch_threads = env["torch_threads"].cast<int64_t>();
    e.cuda = env["cuda"].cast<bool>();
    for (const auto& item : env["dataloaders"].cast<py::list>()) {
      const auto d = item.cast<py::dict>();
      DataLoaderFacts f;
      f.num_workers = d["num_workers"].cast<int64_t>();
      f.batch_size = d["batch_size"].is_none() ? -1 : d["batch_size"].cast<int64_t>();
      f.pin_memory = d["pin_memory"].cast<bool>();
      f.persistent_workers = d["persistent_workers"].cast<bool>();
      f.prefetch_factor = d["prefetch_factor"].is_none() ? -1 : d["prefetch_factor"].cast<int64_t>();
      f.dataset_type = d["dataset"].cast<std::string>();
      f.created_at = d["created_at"].cast<std::string>();
      e.dataloaders.push_back(std::move(f));
    }
    if (env.contains("optimizers")) {
      for (const auto& item : env["optimizers"].cast<py::list>()) {
        const auto d = item.cast<py::dict>();
        OptimizerFacts o;
        o.type = d["type"].cast<std::string>();
        o.param_tensors = d["param_tensors"].cast<int64_t>();
        o.foreach = d["foreach"].cast<bool>();
        e.optimizers.push_back(std::move(o));
      }
    }
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
      run.notes.insert(run.notes.end(), info_notes_.begin(), info_notes_.end());
    }
    run.run.python_mode = o_.python_mode;
    run.run.wall_s = ns_to_s(now_ns() - start_ns_);
    const double cpu = main_cpu0_ >= 0 ? cpu_seconds() : -1;
    run.run.main_thread_cpu_s = cpu >= 0 ? cpu - main_cpu0_ : -1;
    run.notes.insert(run.notes.end(), notes_.begin(), notes_.end());
    ProcessInfo main;  // for `torchneck report`, which merges the workers
    main.pid = ::getpid();
    main.role = "main";
    main.wall_s = run.run.wall_s;
    main.busy_s = std::max(0.0, run.run.main_thread_cpu_s);
    run.processes = {main};
  }

  SessionOptions o_;
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
  std::vector<std::string> info_notes_;
};

}  // namespace
}  // namespace torchneck

PYBIND11_MODULE(_torchneck, m) {
  using namespace torchneck;
  m.doc() = "torchneck's native core: collectors, analysis and reports";
  bind_output_dir(m);
  py::class_<Session>(m, "Session")
      .def(py::init([](const std::string& python_mode, double sample_hz, bool ops,
                       size_t timeline_events_per_thread, double shape_sample_prob, bool modules,
                       int64_t timeline_steps, int64_t trace_steps) {
             SessionOptions o;
             o.trace_steps = trace_steps;
             o.timeline_steps = timeline_steps;
             o.modules = modules;
             o.python_mode = python_mode;
             o.sample_hz = sample_hz;
             o.ops = ops;
             o.timeline_events_per_thread = timeline_events_per_thread;
             o.shape_sample_prob = shape_sample_prob;
             return new Session(o);
           }),
           py::arg("python_mode") = "sample", py::arg("sample_hz") = 200.0, py::arg("ops") = true,
           py::arg("timeline_events_per_thread") = size_t{1} << 19,
           py::arg("shape_sample_prob") = 0.05, py::arg("modules") = true,
           py::arg("timeline_steps") = 0, py::arg("trace_steps") = kDefaultTraceSteps)
      .def("start", &Session::start)
      .def("start_spill", &Session::start_spill, py::arg("out_dir"), py::arg("cwd"), py::arg("top") = 15,
           py::arg("first_s") = 1.0, py::arg("max_interval_s") = 10.0, py::arg("crash_handler") = true)
      .def("set_info", &Session::set_info, py::arg("run_info"), py::arg("env"))
      .def("save", &Session::save, py::arg("run_info"), py::arg("env"), py::arg("path"))
      .def("discard", &Session::discard)
      .def("stop", &Session::stop)
      .def("finish", &Session::finish, py::arg("run_info"), py::arg("env"), py::arg("out_dir"),
           py::arg("cwd"));
  // `torchneck report DIR`: the full report again from DIR/profile.spill
  // (after a kill -9, a fatal signal, or to see it once more).
  m.def(
      "report_from_spill",
      [](const std::string& dir, const std::string& cwd, size_t top, int64_t trace_steps) {
        py::gil_scoped_release nogil;
        Run run = load_run(dir + "/profile.spill");
        // A periodic or crash-time spill has not merged the workers yet; the
        // ones that exited wrote their profiles next to it.
        const bool merged = std::any_of(run.processes.begin(), run.processes.end(),
                                        [](const ProcessInfo& p) { return p.role != "main"; });
        if (!merged) {
          const std::vector<Run> workers = load_worker_runs(dir, run.notes);
          if (!workers.empty()) {
            ProcessInfo main = run.processes.empty() ? ProcessInfo{} : run.processes.front();
            main.role = "main";
            merge_workers(run, main, workers);
          } else {
            run.processes.clear();  // as finish() leaves a run without workers
          }
        }
        OutputOptions out;
        out.dir = dir;
        out.cwd = cwd;
        out.summary.top_python = out.summary.top_ops = top;
        out.trace.steps = trace_steps;
        return write_outputs(run, out);
      },
      py::arg("dir"), py::arg("cwd"), py::arg("top") = 15, py::arg("trace_steps") = kDefaultTraceSteps);
  m.def("set_current_thread_name", [](const std::string& name) {
    set_thread_name(current_thread_index(), name);
  });
}
