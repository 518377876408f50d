// Threads get a small dense index shared by every collector, so the Python
// profile, the samples and the operator records of one thread line up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torchneck {

// The calling thread's index; registers it on first use (a lock, once per
// thread), then a thread_local read.
uint32_t current_thread_index();

// Index of an OS thread id (registers it when new). For the sampler, which
// reads other threads' state.
uint32_t thread_index_for(uint64_t os_tid);

// Linux thread id of the calling thread.
uint64_t current_os_tid();

struct RegisteredThread {
  uint64_t os_tid = 0;
  std::string name;
};

void set_thread_name(uint32_t index, const std::string& name);
std::vector<RegisteredThread> registered_threads();

}  // namespace torchneck
