// The snapshot side of a sampler thread: its lock, tried for a while only,
// since a spill may come from a crashing thread's signal while the sampler
// holds it (collect/collector.h, snapshot()).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

#include "core/clock.h"

namespace torchneck {

// Takes `lock` (deferred) within wait_ns; false when it could not.
inline bool lock_within(std::unique_lock<std::mutex>& lock, int64_t wait_ns) {
  const int64_t deadline = now_ns() + wait_ns;
  while (!lock.try_lock()) {
    if (now_ns() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

}  // namespace torchneck
