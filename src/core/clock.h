// One monotonic nanosecond clock for every collector, and the one place where
// units are converted. Python's time.perf_counter() reads the same
// CLOCK_MONOTONIC on Linux, so timestamps taken in Python can be compared.
#pragma once

#include <cstdint>
#include <ctime>

namespace torchneck {

inline int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline double ns_to_ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }
inline double ns_to_s(int64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace torchneck
