#include "analyze/run_clocks.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace torchneck {
namespace {

// More optimizers stepping per iteration than this is not a step count that
// agrees with the boundaries, but a count from something else.
constexpr uint64_t kMaxBoundariesPerStep = 16;

}  // namespace

RunClocks run_clocks(const Run& run, size_t steps_in_run, int64_t timeline_end_ns) {
  RunClocks out;
  if (steps_in_run == 0 || run.step_clocks.empty()) return out;
  // The thread that ended the most steps: the training loop's.
  std::map<uint32_t, uint64_t> last_step;
  for (const StepClock& c : run.step_clocks) last_step[c.thread_index] = std::max(last_step[c.thread_index], c.step);
  uint32_t thread = 0;
  uint64_t boundaries = 0;
  for (const auto& [t, n] : last_step)
    if (n > boundaries) thread = t, boundaries = n;
  std::vector<StepClock> v;
  for (const StepClock& c : run.step_clocks)
    if (c.thread_index == thread) v.push_back(c);
  std::sort(v.begin(), v.end(), [](const StepClock& a, const StepClock& b) { return a.step < b.step; });
  if (v.size() < 2 || v.front().step == 0) return out;  // a spill written before this field: no counts

  // k boundaries a step: the run's steps against the boundaries this thread
  // ended, give or take a step (the count's first or last step may be a
  // partial one).
  const uint64_t k = (boundaries + steps_in_run / 2) / steps_in_run;
  if (k == 0 || k > kMaxBoundariesPerStep) return out;
  const auto diff = static_cast<int64_t>(boundaries) - static_cast<int64_t>(k * steps_in_run);
  if (std::llabs(diff) > static_cast<int64_t>(k)) return out;
  out.boundaries_per_step = k;

  const auto steps_between = [&](const StepClock& a, const StepClock& b) {
    return static_cast<double>(b.step - a.step) / static_cast<double>(k);
  };
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    const double n = steps_between(v[i], v[i + 1]);
    if (n <= 0 || v[i + 1].t_ns <= v[i].t_ns) continue;
    ClockInterval iv;
    iv.steps = static_cast<uint64_t>(std::llround(n));
    iv.start_ns = v[i].t_ns;
    iv.end_ns = v[i + 1].t_ns;
    iv.step_ns = static_cast<double>(iv.end_ns - iv.start_ns) / n;
    out.intervals.push_back(iv);
  }
  const StepClock& first = v.front();
  const StepClock& last = v.back();
  const double all = steps_between(first, last);
  if (all <= 0) return out;
  out.first_step = first.step / k;
  out.last_step = last.step / k;
  out.step_ns = static_cast<double>(last.t_ns - first.t_ns) / all;
  out.data_ns = static_cast<double>(last.data_ns - first.data_ns) / all;
  if (first.cpu_ns >= 0 && last.cpu_ns >= first.cpu_ns) out.cpu_ns = static_cast<double>(last.cpu_ns - first.cpu_ns) / all;

  // The first clock at or after the timeline's last step ended.
  auto from = std::find_if(v.begin(), v.end(), [&](const StepClock& c) { return c.t_ns >= timeline_end_ns; });
  if (from == v.end() || from->step == last.step) return out;
  const double beyond = steps_between(*from, last);
  if (beyond < 1) return out;
  out.beyond_first_step = from->step / k;
  out.beyond_steps = static_cast<uint64_t>(std::llround(beyond));
  out.beyond_step_ns = static_cast<double>(last.t_ns - from->t_ns) / beyond;
  out.beyond_data_ns = static_cast<double>(last.data_ns - from->data_ns) / beyond;
  return out;
}

}  // namespace torchneck
