// The timeline window in steps (--timeline-steps N): timelines (operator and
// nn.Module events) are kept for the run's first N training steps plus the
// one before the first step boundary, then closed; from then on events are
// only aggregated, and counted as dropped. Aggregates always cover the whole
// run. Independent of it, each thread's timeline is capped in events
// (--timeline-events), so memory is bounded either way.
//
// A step boundary, as the collectors can see it while the run goes on: the
// end of an `Optimizer.step#...` or `ProfilerStep#...` scope. With k
// optimizers stepping per iteration, N boundaries are N/k iterations.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace torchneck {

struct TimelineWindow {
  std::atomic<int64_t> max_steps{0};  // 0: no limit in steps
  std::atomic<int64_t> boundaries{0};
  std::atomic<bool> closed{false};
  std::atomic<int64_t> closed_at_ns{0};

  void reset(int64_t steps) {
    max_steps.store(steps);
    boundaries.store(0);
    closed_at_ns.store(0);
    closed.store(false);
  }
  bool open() const { return !closed.load(std::memory_order_relaxed); }
  // Called at the end of a step-boundary event; once per step, not per event.
  void boundary(int64_t t_ns) {
    const int64_t limit = max_steps.load(std::memory_order_relaxed);
    const int64_t n = boundaries.fetch_add(1, std::memory_order_relaxed) + 1;
    if (limit > 0 && n >= limit + 1 && !closed.load(std::memory_order_relaxed)) {
      closed_at_ns.store(t_ns, std::memory_order_relaxed);
      closed.store(true, std::memory_order_release);
    }
  }
};

inline TimelineWindow& timeline_window() {
  static TimelineWindow w;
  return w;
}

inline bool is_step_boundary_name(std::string_view name) {
  return name.rfind("Optimizer.step#", 0) == 0 || name.rfind("ProfilerStep#", 0) == 0;
}

}  // namespace torchneck
