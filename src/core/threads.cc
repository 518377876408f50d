#include "core/threads.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>
#include <unordered_map>

namespace torchneck {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<RegisteredThread> threads;
  std::unordered_map<uint64_t, uint32_t> by_tid;
};

Registry& registry();
void lock_registry() { registry().mu.lock(); }
void unlock_registry() { registry().mu.unlock(); }

Registry& registry() {
  static auto* r = [] {
    auto* reg = new Registry();  // leaked: used until process exit
    // fork() (DataLoader workers) with the lock held by another thread would
    // leave it locked in the child: fork with it held by the forking thread.
    pthread_atfork(&lock_registry, &unlock_registry, &unlock_registry);
    return reg;
  }();
  return *r;
}

}  // namespace

uint64_t current_os_tid() { return static_cast<uint64_t>(::syscall(SYS_gettid)); }

uint32_t thread_index_for(uint64_t os_tid) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_tid.find(os_tid);
  if (it != r.by_tid.end()) return it->second;
  const auto index = static_cast<uint32_t>(r.threads.size());
  r.threads.push_back(RegisteredThread{os_tid, ""});
  r.by_tid.emplace(os_tid, index);
  return index;
}

uint32_t current_thread_index() {
  thread_local uint32_t index = thread_index_for(current_os_tid());
  return index;
}

void set_thread_name(uint32_t index, const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (index < r.threads.size() && r.threads[index].name.empty()) r.threads[index].name = name;
}

std::vector<RegisteredThread> registered_threads() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.threads;
}

}  // namespace torchneck
