// The calling thread's clocks, read once per step (at a step boundary, by
// the thread that ends it: collect/torch/op_observer.cc): its CPU time and
// its time runnable but waiting for a CPU, both cumulative since the thread
// began, from Linux's /proc/thread-self/schedstat (fields 1 and 2: on-CPU
// ns, run-queue wait ns). The file is opened once per thread and read with
// pread each step: opening it each time (the path walk through /proc, open
// and close) cost tiny_ops' steps ~1-2 % in one process, far more than
// its few microseconds (docs/overhead.md). No torch, no Python.
#pragma once

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace torchneck {

// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), ns: one
// system call, ~0.3 us.
inline int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

struct ThreadClocks {
  int64_t cpu_ns = 0;
  int64_t runqueue_ns = -1;  // -1: schedstat unreadable (a kernel without it)
};

// *fd: the calling thread's own descriptor of its schedstat file, -1 until
// the first call opens it (and again after a failed read).
// A descriptor opened by another thread, or inherited across fork, would
// read that other thread's clocks: the caller keeps one per thread and
// forgets them in a forked child.
inline ThreadClocks read_thread_clocks(int* fd) {
  ThreadClocks c;
  char buf[128];
  if (*fd < 0) *fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (*fd >= 0) {
    const ssize_t n = ::pread(*fd, buf, sizeof buf - 1, 0);
    // Failed (the script closed it, say): forgotten, not closed, as its
    // number may be another file of the script's by now; opened anew next
    // time. (pread moves no file offset, so a reused number is only read.)
    if (n <= 0) *fd = -1;
    if (n > 0) {
      buf[n] = '\0';
      char* end = nullptr;
      const long long cpu = std::strtoll(buf, &end, 10);
      char* end2 = nullptr;
      const long long wait = end != buf ? std::strtoll(end, &end2, 10) : 0;
      if (end != buf && end2 != end) {
        c.cpu_ns = cpu;
        c.runqueue_ns = wait;
        return c;
      }
    }
  }
  c.cpu_ns = thread_cpu_ns();
  return c;
}

}  // namespace torchneck
