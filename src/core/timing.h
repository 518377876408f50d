// TORCHNECK_TIMING=1: where the time of one command goes, phase by phase, on
// stderr. Off (one cached getenv) otherwise; not for hot paths.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <malloc.h>
#include <sys/resource.h>

#include "core/clock.h"

namespace torchneck {

// Prints the time since the previous call (from any thread) and since the
// first, with the minor page faults since the previous call, the resident
// and peak memory, what malloc holds and the size of its main heap (MiB):
// "torchneck: <indent><what> ...".
inline void timing_phase(const char* what, int indent = 0) {
  static const bool on = std::getenv("TORCHNECK_TIMING") != nullptr;
  static int64_t last = now_ns();
  static const int64_t first = last;
  static long last_faults = 0;
  static std::mutex mutex;  // phases of two threads interleave
  if (!on) return;
  const std::lock_guard<std::mutex> lock(mutex);
  const int64_t now = now_ns();
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const struct mallinfo2 m = mallinfo2();
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  // The peak from VmHWM: getrusage's ru_maxrss is the mm's high-water mark
  // as last folded in (on unmaps and exits), lower than the true peak.
  long peak_kb = u.ru_maxrss;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[128];
    while (std::fgets(line, sizeof line, f) != nullptr)
      if (std::strncmp(line, "VmHWM:", 6) == 0) {
        peak_kb = std::strtol(line + 6, nullptr, 10);
        break;
      }
    std::fclose(f);
  }
  std::fprintf(stderr,
               "torchneck: %*s%-*s %7.1f ms (at %6.1f) %6ld page faults, RSS %5.1f MB (peak %5.1f), malloc'd %5.1f MB, "
               "heap %5.1f MB\n",
               indent, "", 26 - indent, what, ns_to_ms(now - last), ns_to_ms(now - first), u.ru_minflt - last_faults,
               static_cast<double>(resident) * 4096.0 / 1048576.0, static_cast<double>(peak_kb) / 1024.0,
               static_cast<double>(m.uordblks + m.hblkhd) / 1048576.0, static_cast<double>(m.arena) / 1048576.0);
  last = now;
  last_faults = u.ru_minflt;
}

}  // namespace torchneck
