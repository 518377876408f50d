#include "bindings/spiller.h"

#include <Python.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <chrono>
#include <thread>
#include <utility>

#include "collect/python/py_names.h"
#include "core/clock.h"
#include "core/interner.h"
#include "core/threads.h"
#include "core/timing.h"
#include "model/run_io.h"
#include "pipeline/pipeline.h"

namespace torchneck {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr size_t kAltStackBytes = 64 * 1024;

struct Spiller {
  SpillOptions options;
  SpillSources sources;
  std::thread thread;
  int pipe_r = -1, pipe_w = -1;  // wakes the thread: 's' stop, 'c' crash, 'n' spill now
  pid_t pid = 0;
  std::mutex last_python_mu;  // the last Python snapshot
  Run last_python;
  bool have_python = false;
  std::atomic<int> crash_signal{0};
  std::atomic<int> crash_done{0};  // 1 written, 2 failed
  struct sigaction previous[sizeof kFatalSignals / sizeof kFatalSignals[0]];
  bool handlers_installed = false;
  void* alt_stack = nullptr;
  std::atomic<bool> running{false};  // read by the signal handler
  // The thread has its thread state and has let the GIL go: from then on it
  // only needs the GIL for a periodic spill's Python part.
  std::atomic<bool> thread_ready{false};
};

Spiller* g_spiller = nullptr;  // set before the handlers, kept afterwards
std::atomic<pthread_t> g_spill_thread{};

const char* signal_name(int sig) {
  const char* name = fatal_signal_name(sig);  // the names the run's ending uses
  return name != nullptr ? name : "a fatal signal";
}

void restore_handler(Spiller& s, int sig) {
  for (size_t i = 0; i < sizeof kFatalSignals / sizeof kFatalSignals[0]; ++i)
    if (kFatalSignals[i] == sig) sigaction(sig, &s.previous[i], nullptr);
}

// Async-signal-safe throughout: atomics, write, nanosleep, sigaction, raise.
void on_fatal(int sig, siginfo_t* info, void*) {
  Spiller* s = g_spiller;
  const int saved_errno = errno;
  if (s == nullptr || getpid() != s->pid || !s->running) {
    if (s != nullptr) restore_handler(*s, sig);
    else signal(sig, SIG_DFL);
    raise(sig);
    errno = saved_errno;
    return;
  }
  if (pthread_equal(pthread_self(), g_spill_thread.load())) {
    // Our own thread faulted (a bug of ours, or memory the crash broke):
    // nobody is left to write the report; the last spill stays on disk.
    // While reporting another thread's crash, leave the ending to that
    // thread's handler, so the process dies by the script's own signal.
    s->crash_done.store(2);
    if (s->crash_signal.load() != 0) {
      for (;;) pause();
    }
    restore_handler(*s, sig);
    if (info == nullptr || info->si_code <= 0 || sig == SIGABRT) raise(sig);
    errno = saved_errno;
    return;
  }
  int expected = 0;
  if (!s->crash_signal.compare_exchange_strong(expected, sig)) {
    // A second fault on another thread while the first is being reported.
    for (;;) pause();  // the first handler ends the process
  }
  const char byte = 'c';
  (void)!write(s->pipe_w, &byte, 1);
  const int64_t steps = static_cast<int64_t>(s->options.crash_wait_s * 100);
  for (int64_t i = 0; i < steps && s->crash_done.load() == 0; ++i) {
    struct timespec ts{0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  restore_handler(*s, sig);
  // A signal sent by kill/raise/abort does not come back by itself: send it
  // again. A fault (SI_KERNEL codes > 0) recurs when the instruction reruns.
  if (info == nullptr || info->si_code <= 0 || sig == SIGABRT) raise(sig);
  errno = saved_errno;
}

void install_handlers(Spiller& s) {
  // An alternate stack for this (the main) thread, so a stack overflow in
  // deep recursion can still run the handler.
  s.alt_stack = std::malloc(kAltStackBytes);
  if (s.alt_stack != nullptr) {
    stack_t ss{};
    stack_t old{};
    sigaltstack(nullptr, &old);
    if (old.ss_flags & SS_DISABLE) {  // keep one that Python's faulthandler set
      ss.ss_sp = s.alt_stack;
      ss.ss_size = kAltStackBytes;
      sigaltstack(&ss, nullptr);
    }
  }
  for (size_t i = 0; i < sizeof kFatalSignals / sizeof kFatalSignals[0]; ++i) {
    struct sigaction sa{};
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(kFatalSignals[i], &sa, &s.previous[i]);
  }
  s.handlers_installed = true;
}

void uninstall_handlers(Spiller& s) {
  if (!s.handlers_installed) return;
  for (size_t i = 0; i < sizeof kFatalSignals / sizeof kFatalSignals[0]; ++i) {
    struct sigaction current{};
    sigaction(kFatalSignals[i], nullptr, &current);
    // Leave alone a handler the script installed after ours.
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_fatal)
      sigaction(kFatalSignals[i], &s.previous[i], nullptr);
  }
  s.handlers_installed = false;
}

// The last Python snapshot, the run facts, and fresh operator data.
Run compose(Spiller& s, int64_t native_wait_ns) {
  Run run;
  {
    std::lock_guard<std::mutex> lock(s.last_python_mu);
    run = s.last_python;
  }
  s.sources.info(run);
  s.sources.native(run, native_wait_ns);
  return run;
}

void spill_once(Spiller& s) {
  timing_phase("periodic spill: start");
  // The Python part needs the GIL; never take it once shutdown has begun.
  if (!interpreter_finalizing()) {
    PyGILState_STATE gil = PyGILState_Ensure();
    timing_phase("GIL taken", 2);
    if (!interpreter_finalizing()) {
      Run py;
      s.sources.python(py);
      std::lock_guard<std::mutex> lock(s.last_python_mu);
      s.last_python = std::move(py);
      s.have_python = true;
    }
    PyGILState_Release(gil);
    timing_phase("Python part (GIL held)", 2);
  }
  Run run = compose(s, 50'000'000);
  timing_phase("compose", 2);
  run.run.ending = RunEnding{EndingKind::kStillRunning, 0};
  save_run(run, s.options.dir + "/profile.spill");
  timing_phase("save", 2);
}

void write_all(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void report_crash(Spiller& s, int sig) {
  Run run = compose(s, 200'000'000);
  run.run.ending = RunEnding{EndingKind::kFatalSignal, sig};
  run.run.exit_code = 128 + sig;
  if (!s.have_python)
    run.notes.push_back("the process died before the first periodic snapshot of the Python profile");
  else
    run.notes.push_back("Python profile: up to the last periodic spill before the fatal signal");
  save_run(run, s.options.dir + "/profile.spill");
  // Worker processes that already exited wrote their profiles: merged in.
  Source source = live_source(std::move(run), s.options.dir);
  PipelineOptions out;
  out.dir = s.options.dir;
  out.cwd = s.options.cwd;
  out.settings = s.options.settings;
  const std::string text = report(source, out);
  write_all(2, std::string("\ntorchneck: the script died by ") + signal_name(sig) +
                   "; the report below is from what was collected until then\n" + text);
}

void spiller_main(Spiller* s) {
  g_spill_thread.store(pthread_self());
  // Keep one thread state for the thread's life, as the sampler does.
  PyGILState_STATE outer = PyGILState_Ensure();
  PyThreadState* saved = PyEval_SaveThread();
  s->thread_ready.store(true);
  const int64_t started = now_ns();
  // No periodic spills (--spill-interval 0): wake only to stop or for a crash.
  const bool periodic = s->options.max_interval_s > 0;
  constexpr int64_t kNever = int64_t{1} << 62;
  double interval = s->options.first_s;
  int64_t next = periodic ? started + static_cast<int64_t>(interval * 1e9) : kNever;
  for (;;) {
    const int64_t wait_ms = std::max<int64_t>(0, (next - now_ns()) / 1'000'000);
    struct pollfd p{s->pipe_r, POLLIN, 0};
    const int r = poll(&p, 1, periodic ? static_cast<int>(std::min<int64_t>(wait_ms, 1 << 30)) : -1);
    if (r > 0) {
      char byte = 0;
      const bool got = read(s->pipe_r, &byte, 1) == 1;
      if (got && byte == 'n') {  // spill now (spill_soon), then on the same schedule
        if (periodic) next = now_ns();
        continue;
      }
      if (got && byte == 'c') {
        try {
          report_crash(*s, s->crash_signal.load());
          s->crash_done.store(1);
        } catch (...) {
          s->crash_done.store(2);
        }
        for (;;) pause();  // the handler ends the process
      }
      break;  // stop
    }
    if (r < 0 && errno == EINTR) continue;
    if (now_ns() < next) continue;
    const int64_t t0 = now_ns();
    try {
      spill_once(*s);
    } catch (const std::exception& e) {
      // The folder went away or filled up: say so once, keep profiling.
      static bool said = false;
      if (!said) write_all(2, std::string("torchneck: periodic spill failed: ") + e.what() + "\n");
      said = true;
    }
    const double cost_s = static_cast<double>(now_ns() - t0) / 1e9;
    interval = std::min(s->options.max_interval_s, interval * 2);
    interval = std::max(interval, cost_s / s->options.max_overhead);
    next = now_ns() + static_cast<int64_t>(interval * 1e9);
  }
  if (!interpreter_finalizing()) {
    PyEval_RestoreThread(saved);
    PyGILState_Release(outer);
  }
}

}  // namespace

void fill_threads_and_strings(Run& run, uint64_t main_os_tid) {
  run.threads.clear();
  for (const auto& t : registered_threads()) run.threads.push_back(ThreadInfo{t.os_tid, t.name});
  for (size_t i = 0; i < run.threads.size(); ++i)
    if (run.threads[i].os_tid == main_os_tid) run.main_thread = static_cast<uint32_t>(i);
  const StringInterner& strings = StringInterner::global();
  run.strings.clear();
  const size_t n = strings.size();
  run.strings.reserve(n);
  for (uint32_t id = 0; id < n; ++id) run.strings.emplace_back(strings.lookup(id));
}

void start_spiller(const SpillOptions& options, SpillSources sources) {
  if (g_spiller != nullptr && g_spiller->running) return;
  if (g_spiller == nullptr) g_spiller = new Spiller();  // kept: a late signal may look
  Spiller& s = *g_spiller;
  s.options = options;
  s.sources = std::move(sources);
  s.pid = getpid();
  s.have_python = false;
  s.last_python = Run{};
  s.crash_signal.store(0);
  s.crash_done.store(0);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;  // no spills; the final report still comes
  s.pipe_r = fds[0];
  s.pipe_w = fds[1];
  s.running = true;
  s.thread_ready.store(false);
  s.thread = std::thread(spiller_main, &s);
  // Wait, without the GIL, until the thread has taken and let go of it once.
  // A script that crashes right away (holding the GIL) would otherwise find
  // the thread still waiting for the GIL to start: no report, and the
  // handler's crash_wait_s lost.
  Py_BEGIN_ALLOW_THREADS
  while (!s.thread_ready.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  Py_END_ALLOW_THREADS
  if (options.crash_handler) install_handlers(s);
}

void spill_soon() {
  Spiller* s = g_spiller;
  if (s == nullptr || !s->running || getpid() != s->pid) return;
  const char byte = 'n';
  (void)!write(s->pipe_w, &byte, 1);
}

void stop_spiller() {
  Spiller* s = g_spiller;
  if (s == nullptr || !s->running) return;
  uninstall_handlers(*s);
  s->running = false;
  if (getpid() != s->pid) {  // a forked child: the thread is the parent's
    (void)new std::thread(std::move(s->thread));
    return;
  }
  const char byte = 's';
  (void)!write(s->pipe_w, &byte, 1);
  Py_BEGIN_ALLOW_THREADS
  s->thread.join();
  Py_END_ALLOW_THREADS
  close(s->pipe_r);
  close(s->pipe_w);
  s->pipe_r = s->pipe_w = -1;
}

void forget_spiller() {
  Spiller* s = g_spiller;
  if (s == nullptr || !s->running || getpid() == s->pid) return;
  uninstall_handlers(*s);
  s->running = false;
  (void)new std::thread(std::move(s->thread));  // not joinable here: leaked
  close(s->pipe_r);
  close(s->pipe_w);
  s->pipe_r = s->pipe_w = -1;
}

}  // namespace torchneck
