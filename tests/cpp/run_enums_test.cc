// The enums a run is described by (model/run_enums.h): every value has one
// string and comes back from it, an unknown string is refused with a message
// that names it, and the spill file stores the same strings it stored when
// these were strings, at the same place, so old spills still load.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/run.h"
#include "model/run_enums.h"
#include "model/run_io.h"
#include "spill_blocks.h"

namespace torchneck {
namespace {

// The strings the spill file, profile.json and the report used before the
// enums: the format's ground truth, written out here on purpose.
const std::vector<std::pair<PythonMode, std::string>> kModes = {
    {PythonMode::kSample, "sample"}, {PythonMode::kTrace, "trace"}, {PythonMode::kOff, "off"}};
const std::vector<std::pair<ProcessRole, std::string>> kRoles = {
    {ProcessRole::kMain, "main"}, {ProcessRole::kDataLoaderWorker, "dataloader_worker"}};
const std::vector<std::pair<RunEnding, std::string>> kEndings = {
    {{EndingKind::kFinished, 0}, "finished"},
    {{EndingKind::kSysExit, 0}, "sys.exit"},
    {{EndingKind::kException, 0}, "exception"},
    {{EndingKind::kKeyboardInterrupt, 0}, "KeyboardInterrupt"},
    {{EndingKind::kSigterm, 0}, "SIGTERM"},
    {{EndingKind::kSighup, 0}, "SIGHUP"},
    {{EndingKind::kSigusr1, 0}, "SIGUSR1"},
    {{EndingKind::kSigquit, 0}, "SIGQUIT"},
    {{EndingKind::kOsExit, 0}, "os._exit"},
    {{EndingKind::kStillRunning, 0}, "still running"},
    {{EndingKind::kIngestedTrace, 0}, "trace"},
    {{EndingKind::kFatalSignal, SIGSEGV}, "fatal signal SIGSEGV"},
    {{EndingKind::kFatalSignal, SIGBUS}, "fatal signal SIGBUS"},
    {{EndingKind::kFatalSignal, SIGILL}, "fatal signal SIGILL"},
    {{EndingKind::kFatalSignal, SIGFPE}, "fatal signal SIGFPE"},
    {{EndingKind::kFatalSignal, SIGABRT}, "fatal signal SIGABRT"},
    {{EndingKind::kFatalSignal, 42}, "fatal signal 42"},  // a signal without a name here
};

template <typename F>
std::string rejection(F parse, const std::string& s) {
  try {
    parse(s);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(RunEnums, EveryValueRoundTripsThroughItsString) {
  for (const auto& [mode, s] : kModes) {
    EXPECT_EQ(to_string(mode), s);
    EXPECT_EQ(python_mode_from_string(s), mode) << s;
  }
  for (const auto& [role, s] : kRoles) {
    EXPECT_EQ(to_string(role), s);
    EXPECT_EQ(process_role_from_string(s), role) << s;
  }
  for (const auto& [ending, s] : kEndings) {
    EXPECT_EQ(to_string(ending), s);
    EXPECT_EQ(run_ending_from_string(s), ending) << s;
  }
}

TEST(RunEnums, AnUnknownStringIsRefusedByName) {
  // GIVEN strings that are close to, but not, accepted ones
  // THEN each is refused, and the message names it and what is accepted
  std::string m = rejection(python_mode_from_string, "Sample");
  EXPECT_NE(m.find("\"Sample\""), std::string::npos) << m;
  EXPECT_NE(m.find("sample, trace, off"), std::string::npos) << m;
  m = rejection(process_role_from_string, "worker");
  EXPECT_NE(m.find("\"worker\""), std::string::npos) << m;
  EXPECT_NE(m.find("dataloader_worker"), std::string::npos) << m;
  m = rejection(run_ending_from_string, "finish");
  EXPECT_NE(m.find("\"finish\""), std::string::npos) << m;
  EXPECT_NE(m.find("fatal signal NAME"), std::string::npos) << m;
  for (const char* bad : {"fatal signal ", "fatal signal SIGFOO", "fatal signal 0", "fatal signal 11x"}) {
    m = rejection(run_ending_from_string, bad);
    EXPECT_NE(m.find(bad), std::string::npos) << bad << ": " << m;
  }
  EXPECT_NE(rejection(python_mode_from_string, ""), "");
}

std::string u64_bytes(uint64_t v) {
  std::string b(sizeof v, '\0');
  std::memcpy(&b[0], &v, sizeof v);
  return b;
}

std::string stored(const std::string& s) { return u64_bytes(s.size()) + s; }

Run described_run() {
  Run r;
  r.run.script = "train.py";
  r.run.argv = {"train.py", "--fast"};
  r.run.python_mode = PythonMode::kTrace;
  r.run.ending = RunEnding{EndingKind::kFatalSignal, SIGSEGV};
  ProcessInfo main;
  main.pid = 10;
  ProcessInfo worker;
  worker.pid = 11;
  worker.role = ProcessRole::kDataLoaderWorker;
  worker.worker_id = 0;
  r.processes = {main, worker};
  return r;
}

TEST(RunEnums, TheSpillStoresTheStringsWhereItStoredThemBefore) {
  // GIVEN a run described by each enum
  const torchneck::Run run = described_run();
  // WHEN it is encoded
  const std::string bytes = encode_run(run);
  // THEN the Python mode and the ending are the length-prefixed strings at
  // the start of the 'run' section (after the header and the block's frame),
  // after script, argv, exit code and six doubles (the wall, main-thread and
  // machine clocks), as strings as in format version 4 before the enums
  size_t at = test_support::kSpillHeaderBytes + 8 + stored("train.py").size() + 8 + stored("train.py").size() +
              stored("--fast").size() + 4 + 6 * 8;
  const std::string expected = stored("trace") + stored("fatal signal SIGSEGV");
  ASSERT_LE(at + expected.size(), bytes.size());
  EXPECT_EQ(bytes.substr(at, expected.size()), expected);
  // and each process's role is its string
  EXPECT_NE(bytes.find(stored("main")), std::string::npos);
  EXPECT_NE(bytes.find(stored("dataloader_worker")), std::string::npos);
  // and it decodes to the same enums
  const torchneck::Run back = decode_run(bytes);
  EXPECT_EQ(back.run.python_mode, PythonMode::kTrace);
  EXPECT_EQ(back.run.ending, run.run.ending);
  ASSERT_EQ(back.processes.size(), 2u);
  EXPECT_EQ(back.processes[0].role, ProcessRole::kMain);
  EXPECT_EQ(back.processes[1].role, ProcessRole::kDataLoaderWorker);
}

TEST(RunEnums, ASpillWithAnUnknownStringIsAnErrorNamingIt) {
  // GIVEN a spill whose Python mode, ending or role was changed to a string
  // of the same length that no enum value has
  const std::string bytes = encode_run(described_run());
  const std::vector<std::pair<std::string, std::string>> damages = {
      {stored("trace"), stored("trxce")},
      {stored("fatal signal SIGSEGV"), stored("fatal signal SIGSEGX")},
      {stored("dataloader_worker"), stored("dataloader_wrker_")},
  };
  for (const auto& [from, to] : damages) {
    std::string b = bytes;
    const size_t at = b.find(from);
    ASSERT_NE(at, std::string::npos);
    b.replace(at, from.size(), to);
    b = test_support::resealed(b);  // its checksums made again: only the string is wrong
    // WHEN it is decoded THEN it is refused with the string and a byte offset
    try {
      decode_run(b);
      ADD_FAILURE() << "accepted " << to.substr(8);
    } catch (const std::runtime_error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(to.substr(8)), std::string::npos) << m;
      EXPECT_EQ(m.rfind("byte ", 0), 0u) << m;
    }
  }
}

}  // namespace
}  // namespace torchneck
