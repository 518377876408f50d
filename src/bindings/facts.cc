#include "bindings/facts.h"

#include <pybind11/stl.h>

#include <stdexcept>

namespace py = pybind11;

namespace torchneck {

namespace {

// How the run was profiled and how it ended.
void bind_run_kinds(py::module_& m) {
  py::enum_<PythonMode>(m, "PythonMode")
      .value("sample", PythonMode::kSample)
      .value("trace", PythonMode::kTrace)
      .value("off", PythonMode::kOff);
  py::enum_<ProcessRole>(m, "ProcessRole")
      .value("main", ProcessRole::kMain)
      .value("dataloader_worker", ProcessRole::kDataLoaderWorker);
  py::enum_<EndingKind>(m, "Ending")
      .value("finished", EndingKind::kFinished)
      .value("sys_exit", EndingKind::kSysExit)
      .value("exception", EndingKind::kException)
      .value("keyboard_interrupt", EndingKind::kKeyboardInterrupt)
      .value("sigterm", EndingKind::kSigterm)
      .value("sighup", EndingKind::kSighup)
      .value("sigusr1", EndingKind::kSigusr1)
      .value("sigquit", EndingKind::kSigquit)
      .value("os_exit", EndingKind::kOsExit)
      .value("fatal_signal", EndingKind::kFatalSignal)
      .value("still_running", EndingKind::kStillRunning)
      .value("trace", EndingKind::kIngestedTrace);

  py::class_<RunInfo>(m, "RunInfo")
      .def(py::init<>())
      .def_readwrite("script", &RunInfo::script)
      .def_readwrite("argv", &RunInfo::argv)
      .def_readwrite("exit_code", &RunInfo::exit_code)
      .def_readwrite("wall_s", &RunInfo::wall_s)
      .def_readwrite("main_thread_cpu_s", &RunInfo::main_thread_cpu_s)
      .def_readwrite("main_thread_runqueue_s", &RunInfo::main_thread_runqueue_s)
      .def_readwrite("process_cpu_s", &RunInfo::process_cpu_s)
      .def_readwrite("machine_cpu_s", &RunInfo::machine_cpu_s)
      .def_readwrite("machine_steal_s", &RunInfo::machine_steal_s)
      .def_readwrite("start_unix_s", &RunInfo::start_unix_s)
      .def_property(
          "ending", [](const RunInfo& r) { return r.ending.kind; },
          [](RunInfo& r, EndingKind kind) {
            // Only the crash handler knows which signal; Python never sees it.
            if (kind == EndingKind::kFatalSignal) throw py::value_error("a fatal-signal ending is set by the crash handler");
            r.ending = RunEnding{kind, 0};
          });

}

// The script's environment: its DataLoaders, optimizers, library versions.
void bind_environment(py::module_& m) {
  py::class_<DataLoaderFacts>(m, "DataLoaderFacts")
      .def(py::init<>())
      .def_readwrite("num_workers", &DataLoaderFacts::num_workers)
      .def_readwrite("batch_size", &DataLoaderFacts::batch_size)
      .def_readwrite("pin_memory", &DataLoaderFacts::pin_memory)
      .def_readwrite("persistent_workers", &DataLoaderFacts::persistent_workers)
      .def_readwrite("prefetch_factor", &DataLoaderFacts::prefetch_factor)
      .def_readwrite("dataset_type", &DataLoaderFacts::dataset_type)
      .def_readwrite("created_at", &DataLoaderFacts::created_at);

  py::class_<OptimizerFacts>(m, "OptimizerFacts")
      .def(py::init<>())
      .def_readwrite("type", &OptimizerFacts::type)
      .def_readwrite("param_tensors", &OptimizerFacts::param_tensors)
      .def_readwrite("foreach", &OptimizerFacts::foreach);

  // The lists are copied in and out (pybind11/stl.h): assign a whole list;
  // env.dataloaders.append(x) would change a copy.
  py::class_<EnvFacts>(m, "EnvFacts")
      .def(py::init<>())
      .def_readwrite("python", &EnvFacts::python)
      .def_readwrite("torch", &EnvFacts::torch)
      .def_readwrite("cpu_cores", &EnvFacts::cpu_cores)
      .def_readwrite("torch_threads", &EnvFacts::torch_threads)
      .def_readwrite("cuda", &EnvFacts::cuda)
      .def_readwrite("dataloaders", &EnvFacts::dataloaders)
      .def_readwrite("optimizers", &EnvFacts::optimizers);

  // The fields Python knows; op_calls, python_samples and top_functions are
  // filled when the workers are merged (model/processes.cc).
}

// The processes, experiments and graphs of one run.
void bind_run_parts(py::module_& m) {
  py::class_<ProcessInfo>(m, "ProcessInfo")
      .def(py::init<>())
      .def_readwrite("pid", &ProcessInfo::pid)
      .def_readwrite("role", &ProcessInfo::role)
      .def_readwrite("worker_id", &ProcessInfo::worker_id)
      .def_readwrite("start_method", &ProcessInfo::start_method)
      .def_readwrite("wall_s", &ProcessInfo::wall_s)
      .def_readwrite("start_ns", &ProcessInfo::start_ns)
      .def_readwrite("busy_s", &ProcessInfo::busy_s)
      .def_readwrite("cpu_s", &ProcessInfo::cpu_s)
      .def_readwrite("batches", &ProcessInfo::batches)
      .def_readwrite("batch_ns_max", &ProcessInfo::batch_ns_max);

  py::class_<Experiment>(m, "Experiment")
      .def(py::init<>())
      .def_readwrite("setting", &Experiment::setting)
      .def_property(
          "state", [](const Experiment& e) { return std::string(to_string(e.state)); },
          [](Experiment& e, const std::string& s) { e.state = experiment_state_from_string(s); })
      .def_readwrite("applied", &Experiment::applied)
      .def_readwrite("note", &Experiment::note)
      .def_readwrite("rounds", &Experiment::rounds)
      .def_readwrite("warmup_steps", &Experiment::warmup_steps)
      .def_readwrite("baseline_ns", &Experiment::baseline_ns)
      .def_readwrite("try_ns", &Experiment::try_ns);
  py::class_<GrowingGraph>(m, "GrowingGraph")
      .def(py::init<>())
      .def_readwrite("variable", &GrowingGraph::variable)
      .def_readwrite("scope", &GrowingGraph::scope)
      .def_readwrite("file", &GrowingGraph::file)
      .def_readwrite("line", &GrowingGraph::line)
      .def_readwrite("code", &GrowingGraph::code)
      .def_readwrite("nodes_first", &GrowingGraph::nodes_first)
      .def_readwrite("nodes_last", &GrowingGraph::nodes_last)
      .def_readwrite("nodes_cap", &GrowingGraph::nodes_cap)
      .def_readwrite("step_first", &GrowingGraph::step_first)
      .def_readwrite("step_last", &GrowingGraph::step_last)
      .def_readwrite("kept", &GrowingGraph::kept);

}

// The GPU window, the rank, and the facts handed over at the end.
void bind_window_rank_and_facts(py::module_& m) {
  py::class_<GpuWindow>(m, "GpuWindow")
      .def(py::init<>())
      .def_readwrite("mode", &GpuWindow::mode)
      .def_property(
          "state", [](const GpuWindow& w) { return std::string(to_string(w.state)); },
          [](GpuWindow& w, const std::string& s) { w.state = gpu_window_state_from_string(s); })
      .def_readwrite("note", &GpuWindow::note)
      .def_readwrite("trace_path", &GpuWindow::trace_path)
      .def_readwrite("activities", &GpuWindow::activities)
      .def_readwrite("requested_steps", &GpuWindow::requested_steps)
      .def_readwrite("first_step", &GpuWindow::first_step)
      .def_readwrite("last_step", &GpuWindow::last_step)
      .def_readwrite("start_ns", &GpuWindow::start_ns)
      .def_readwrite("end_ns", &GpuWindow::end_ns)
      .def_readwrite("clock_offset_ns", &GpuWindow::clock_offset_ns)
      .def_readwrite("cuda_peak_allocated", &GpuWindow::cuda_peak_allocated)
      .def_readwrite("cuda_peak_reserved", &GpuWindow::cuda_peak_reserved);

  py::class_<RankInfo>(m, "RankInfo")
      .def(py::init<>())
      .def_readwrite("rank", &RankInfo::rank)
      .def_readwrite("world_size", &RankInfo::world_size)
      .def_readwrite("local_rank", &RankInfo::local_rank)
      .def_readwrite("backend", &RankInfo::backend)
      .def_readwrite("host", &RankInfo::host)
      .def_readwrite("job", &RankInfo::job);

  py::class_<RunFacts>(m, "RunFacts")
      .def(py::init<>())
      .def_readwrite("run", &RunFacts::run)
      .def_readwrite("env", &RunFacts::env)
      .def_readwrite("notes", &RunFacts::notes)
      .def_readwrite("thread_names", &RunFacts::thread_names)
      .def_readwrite("main_tid", &RunFacts::main_tid)
      .def_readwrite("process", &RunFacts::process)
      .def_readwrite("growing_graphs", &RunFacts::growing_graphs)
      .def_readwrite("gpu_window", &RunFacts::gpu_window)
      .def_readwrite("rank", &RunFacts::rank);
}

}  // namespace

void bind_facts(py::module_& m) {
  bind_run_kinds(m);
  bind_environment(m);
  bind_run_parts(m);
  bind_window_rank_and_facts(m);
}

}  // namespace torchneck
