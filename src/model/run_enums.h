// The kinds a run is described by, as enums: how Python was profiled, how
// the run ended, what a process was. Each has one to-string/from-string pair,
// and those strings are what profile.json, the terminal report, the spill
// file and the Python bindings show: an old spill, which stored the strings,
// still loads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace torchneck {

// How the Python side was profiled: the sampler, the deterministic tracer
// (cProfile semantics), or not at all (also an ingested Kineto trace).
enum class PythonMode : uint8_t { kSample, kTrace, kOff };

// "sample", "trace", "off".
const char* to_string(PythonMode mode);
// Throws std::invalid_argument, naming the string and the accepted ones.
PythonMode python_mode_from_string(std::string_view s);

enum class ProcessRole : uint8_t { kMain, kDataLoaderWorker };

// "main", "dataloader_worker".
const char* to_string(ProcessRole role);
// Throws std::invalid_argument, naming the string and the accepted ones.
ProcessRole process_role_from_string(std::string_view s);

// A live run's GPU window (GpuWindow, model/run.h; the launcher's
// python/torchneck/gpu_window.py decides it).
enum class GpuWindowState : uint8_t {
  kNone,         // "": no window was asked about (a Kineto trace, an old spill)
  kRecorded,     // "recorded": the trace is at GpuWindow::trace_path
  kNoGpu,        // "no_gpu": CUDA not available (--gpu=auto)
  kOff,          // "off": --gpu=off
  kUnavailable,  // "unavailable": this torch has no Kineto
  kSkipped,      // "skipped": the script ended before, or ran torch.profiler itself (note)
  kFailed,       // "failed": the profiler or the export raised, or its trace could not be read (note)
};

const char* to_string(GpuWindowState state);
// Throws std::invalid_argument, naming the string and the accepted ones.
GpuWindowState gpu_window_state_from_string(std::string_view s);

// What became of one --try experiment (Experiment, model/run.h).
enum class ExperimentState : uint8_t {
  kNone,           // "": not run
  kMeasured,       // "measured"
  kNotApplicable,  // "not_applicable": nothing to apply it to (no DataLoader, no CUDA)
  kOverridden,     // "overridden": the script set it back itself
  kFailed,         // "failed": a run ended badly or saw no optimizer step
};

const char* to_string(ExperimentState state);
// Throws std::invalid_argument, naming the string and the accepted ones.
ExperimentState experiment_state_from_string(std::string_view s);

// How the run ended. The launcher (python/torchneck/runner.py) sets the
// kinds up to kOsExit; the spiller sets kStillRunning (a periodic spill) and
// kFatalSignal; ingest sets kIngestedTrace (a Kineto trace has no ending).
enum class EndingKind : uint8_t {
  kFinished,           // "finished": the script returned
  kSysExit,            // "sys.exit"
  kException,          // "exception": an uncaught exception
  kKeyboardInterrupt,  // "KeyboardInterrupt"
  kSigterm,            // "SIGTERM"
  kSighup,             // "SIGHUP"
  kSigusr1,            // "SIGUSR1"
  kSigquit,            // "SIGQUIT"
  kOsExit,             // "os._exit"
  kFatalSignal,        // "fatal signal SIGSEGV": RunEnding::signal says which
  kStillRunning,       // "still running": what the last periodic spill saw
  kIngestedTrace,      // "trace"
};

struct RunEnding {
  EndingKind kind = EndingKind::kFinished;
  int signal = 0;  // kFatalSignal: the signal number (SIGSEGV...), else 0

  bool operator==(const RunEnding& o) const { return kind == o.kind && signal == o.signal; }
  bool operator!=(const RunEnding& o) const { return !(*this == o); }
};

// "finished", ..., "fatal signal SIGSEGV" (a signal without a name here:
// "fatal signal 42").
std::string to_string(const RunEnding& ending);
// Throws std::invalid_argument, naming the string and the accepted ones.
RunEnding run_ending_from_string(std::string_view s);

// "SIGSEGV" for the fatal signals the crash handler catches (and SIGKILL,
// SIGTERM, SIGINT); nullptr for another one.
const char* fatal_signal_name(int signal);

}  // namespace torchneck
