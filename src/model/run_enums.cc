#include "model/run_enums.h"

#include <csignal>
#include <cstdlib>
#include <stdexcept>

namespace torchneck {
namespace {

struct Named {
  int value;
  const char* name;
};

// One table per enum: to_string and from_string read the same one, so the
// two cannot disagree.
constexpr Named kPythonModes[] = {
    {static_cast<int>(PythonMode::kSample), "sample"},
    {static_cast<int>(PythonMode::kTrace), "trace"},
    {static_cast<int>(PythonMode::kOff), "off"},
};

constexpr Named kProcessRoles[] = {
    {static_cast<int>(ProcessRole::kMain), "main"},
    {static_cast<int>(ProcessRole::kDataLoaderWorker), "dataloader_worker"},
};

constexpr Named kEndings[] = {
    {static_cast<int>(EndingKind::kFinished), "finished"},
    {static_cast<int>(EndingKind::kSysExit), "sys.exit"},
    {static_cast<int>(EndingKind::kException), "exception"},
    {static_cast<int>(EndingKind::kKeyboardInterrupt), "KeyboardInterrupt"},
    {static_cast<int>(EndingKind::kSigterm), "SIGTERM"},
    {static_cast<int>(EndingKind::kSighup), "SIGHUP"},
    {static_cast<int>(EndingKind::kSigusr1), "SIGUSR1"},
    {static_cast<int>(EndingKind::kSigquit), "SIGQUIT"},
    {static_cast<int>(EndingKind::kOsExit), "os._exit"},
    {static_cast<int>(EndingKind::kStillRunning), "still running"},
    {static_cast<int>(EndingKind::kIngestedTrace), "trace"},
};
constexpr Named kGpuWindowStates[] = {
    {static_cast<int>(GpuWindowState::kNone), ""},
    {static_cast<int>(GpuWindowState::kRecorded), "recorded"},
    {static_cast<int>(GpuWindowState::kNoGpu), "no_gpu"},
    {static_cast<int>(GpuWindowState::kOff), "off"},
    {static_cast<int>(GpuWindowState::kUnavailable), "unavailable"},
    {static_cast<int>(GpuWindowState::kSkipped), "skipped"},
    {static_cast<int>(GpuWindowState::kFailed), "failed"},
};

constexpr Named kExperimentStates[] = {
    {static_cast<int>(ExperimentState::kNone), ""},
    {static_cast<int>(ExperimentState::kMeasured), "measured"},
    {static_cast<int>(ExperimentState::kNotApplicable), "not_applicable"},
    {static_cast<int>(ExperimentState::kOverridden), "overridden"},
    {static_cast<int>(ExperimentState::kFailed), "failed"},
};

constexpr std::string_view kFatalPrefix = "fatal signal ";

constexpr Named kSignals[] = {
    {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGILL, "SIGILL"},   {SIGFPE, "SIGFPE"},
    {SIGABRT, "SIGABRT"}, {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},
};

template <size_t N>
const char* name_of(const Named (&table)[N], int value) {
  for (const auto& n : table)
    if (n.value == value) return n.name;
  return nullptr;
}

template <size_t N>
int value_of(const Named (&table)[N], std::string_view s, const char* what) {
  for (const auto& n : table)
    if (s == n.name) return n.value;
  std::string accepted;
  for (const auto& n : table) accepted += (accepted.empty() ? "" : ", ") + std::string(n.name);
  throw std::invalid_argument("unknown " + std::string(what) + " \"" + std::string(s) + "\" (expected one of: " +
                              accepted + ")");
}

// An enum's name in its table ("?" for a value it lacks), and the value of a name.
template <typename Enum, size_t N>
const char* enum_name(const Named (&table)[N], Enum v) {
  const char* name = name_of(table, static_cast<int>(v));
  return name != nullptr ? name : "?";
}

template <typename Enum, size_t N>
Enum enum_value(const Named (&table)[N], std::string_view s, const char* what) {
  return static_cast<Enum>(value_of(table, s, what));
}

}  // namespace

const char* to_string(PythonMode mode) { return enum_name(kPythonModes, mode); }
PythonMode python_mode_from_string(std::string_view s) {
  return enum_value<PythonMode>(kPythonModes, s, "Python mode");
}

const char* to_string(ProcessRole role) { return enum_name(kProcessRoles, role); }
ProcessRole process_role_from_string(std::string_view s) {
  return enum_value<ProcessRole>(kProcessRoles, s, "process role");
}

const char* to_string(GpuWindowState state) { return enum_name(kGpuWindowStates, state); }
GpuWindowState gpu_window_state_from_string(std::string_view s) {
  return enum_value<GpuWindowState>(kGpuWindowStates, s, "GPU window state");
}

const char* to_string(ExperimentState state) { return enum_name(kExperimentStates, state); }
ExperimentState experiment_state_from_string(std::string_view s) {
  return enum_value<ExperimentState>(kExperimentStates, s, "experiment state");
}

const char* fatal_signal_name(int signal) { return name_of(kSignals, signal); }

std::string to_string(const RunEnding& ending) {
  if (ending.kind == EndingKind::kFatalSignal) {
    const char* name = fatal_signal_name(ending.signal);
    return std::string(kFatalPrefix) + (name != nullptr ? name : std::to_string(ending.signal));
  }
  return enum_name(kEndings, ending.kind);
}

RunEnding run_ending_from_string(std::string_view s) {
  if (s.substr(0, kFatalPrefix.size()) == kFatalPrefix) {
    const std::string sig(s.substr(kFatalPrefix.size()));
    for (const auto& n : kSignals)
      if (sig == n.name) return RunEnding{EndingKind::kFatalSignal, n.value};
    char* end = nullptr;
    const long number = std::strtol(sig.c_str(), &end, 10);
    if (!sig.empty() && *end == '\0' && number > 0 && number < 128)
      return RunEnding{EndingKind::kFatalSignal, static_cast<int>(number)};
    throw std::invalid_argument("unknown signal in run ending \"" + std::string(s) + "\"");
  }
  try {
    return RunEnding{enum_value<EndingKind>(kEndings, s, "run ending"), 0};
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(e.what()) + " or \"fatal signal NAME\"");
  }
}

}  // namespace torchneck
