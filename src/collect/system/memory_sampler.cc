#include "collect/system/memory_sampler.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "collect/system/lock_within.h"
#include "core/clock.h"

namespace torchneck {

namespace {

long page_size() {
  static const long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? p : 4096;
}

// statm's second field: resident pages. pread at 0 re-reads a /proc file
// without reopening it.
int64_t read_resident(int fd) {
  char buf[128];
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char* p = buf;
  std::strtoll(p, &p, 10);  // size
  const long long resident = std::strtoll(p, &p, 10);
  return resident > 0 ? resident * page_size() : -1;
}

struct SamplerState {
  explicit SamplerState(const MemorySamplerOptions& o) : options(o), series(o.capacity) {}
  MemorySamplerOptions options;
  std::mutex mu;  // series
  std::condition_variable wake;
  bool stopping = false;  // under mu
  MemorySeries series;
  std::thread thread;
  int fd = -1;
  pid_t owner_pid = 0;
};

SamplerState* g_state = nullptr;  // the session's calls come one at a time (GIL)

MemorySample sample_now(int fd, int64_t (*torch_allocated)()) {
  MemorySample s;
  s.t_ns = now_ns();
  s.rss_bytes = read_resident(fd);
  s.torch_allocated_bytes = torch_allocated != nullptr ? torch_allocated() : -1;
  return s;
}

void sampler_main(SamplerState* st) {
  std::unique_lock<std::mutex> lock(st->mu);
  // Deadlines on the base interval, so that a late wake-up does not shift
  // every later sample.
  auto next = std::chrono::steady_clock::now();
  while (!st->stopping) {
    next += std::chrono::nanoseconds(st->options.interval_ns);
    if (st->wake.wait_until(lock, next, [st] { return st->stopping; })) break;
    lock.unlock();
    const MemorySample s = sample_now(st->fd, st->options.torch_allocated);  // the read without the lock
    lock.lock();
    if (s.rss_bytes >= 0) st->series.tick(s);
  }
}

}  // namespace

int64_t resident_bytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const int64_t r = read_resident(fd);
  ::close(fd);
  return r;
}

bool start_memory_sampler(const MemorySamplerOptions& options, std::string* error) {
  if (g_state != nullptr) {
    *error = "memory sampler: already running";
    return false;
  }
  auto* st = new SamplerState(options);
  st->fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  const MemorySample first = st->fd >= 0 ? sample_now(st->fd, st->options.torch_allocated) : MemorySample{0, -1, -1};
  if (first.rss_bytes < 0) {
    if (st->fd >= 0) ::close(st->fd);
    delete st;
    *error = "memory sampler: /proc/self/statm cannot be read; no resident memory over the run";
    return false;
  }
  st->series.tick(first);
  st->owner_pid = ::getpid();
  st->thread = std::thread(sampler_main, st);
  g_state = st;
  return true;
}

void stop_memory_sampler() {
  SamplerState* st = g_state;
  if (st == nullptr || !st->thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->stopping = true;
  }
  st->wake.notify_all();
  st->thread.join();
  const MemorySample last = sample_now(st->fd, st->options.torch_allocated);
  if (last.rss_bytes >= 0) st->series.add(last);
}

bool snapshot_memory_sampler(Run& run, int64_t wait_ns) {
  SamplerState* st = g_state;
  if (st == nullptr) return true;
  std::unique_lock<std::mutex> lock(st->mu, std::defer_lock);
  if (!lock_within(lock, wait_ns)) return false;
  run.memory = st->series.samples();
  run.memory_interval_ns = st->options.interval_ns * st->series.stride();
  return true;
}

void collect_memory_sampler(Run& run) {
  SamplerState* st = g_state;
  if (st == nullptr) return;
  run.memory = st->series.samples();
  run.memory_interval_ns = st->options.interval_ns * st->series.stride();
  if (st->fd >= 0) ::close(st->fd);
  delete st;
  g_state = nullptr;
}

void discard_memory_sampler() {
  SamplerState* st = g_state;
  if (st == nullptr) return;
  g_state = nullptr;
  if (st->owner_pid != ::getpid()) {
    // A forked child: the thread and perhaps a held lock are the parent's;
    // the state is leaked, as the thread handle can be neither joined nor
    // detached here.
    return;
  }
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->stopping = true;
  }
  st->wake.notify_all();
  if (st->thread.joinable()) st->thread.join();
  if (st->fd >= 0) ::close(st->fd);
  delete st;
}

}  // namespace torchneck
