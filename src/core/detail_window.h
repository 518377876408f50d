// Detail windows (--detail=window, the default; docs/overhead.md): when the
// operator detail (every torch operator and backward node as an event, the
// nn.Module scopes, the sampled input shapes) is recorded, and when only the
// cheap skeleton is (the user scopes: optimizer steps, DataLoader fetches,
// collectives' Works; the Python sampler; memory).
//
// The per-operator callbacks cost what torch's RecordFunction machinery
// costs once any callback is registered for operators (~0.2 us per operator
// here, before ours runs), so on a model of many small operators they cannot
// stay on for the whole run within a few percent. Detail is on from the
// start (set-up and warm-up steps) through `window` steady steps, then off;
// the policy then measures what the detail cost — the median of the
// window's last `window` steps against the light steps' that follow — and
// reopens a window of 1 + `window` steps every `period` steps, with period
// chosen so that the
// detail costs about `budget` of the run: a model of large operators, whose
// detail costs less than the budget, stays detailed, but for the light
// steps of a probe now and then (after 20 detailed steps, then 40, ...).
//
// A rank of a distributed job follows a fixed schedule instead
// (lockstep_period): a window every lockstep_period steps, counted from the
// run's start, whatever the detail costs, so that every rank details the
// same steps and the cross-rank analysis compares the same collectives with
// each rank's operators known (analyze/cross_rank.cc); each rank's measured cost
// could only be agreed on through a collective of our own.
//
// The policy (DetailPolicy) is plain code, tested on its own; the switch
// (DetailWindow) is the one flag the collectors read.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/stats.h"

namespace torchneck {

struct DetailPolicyOptions {
  // Steps before the first window that are always detailed: the first
  // steps are slow (allocations, lazy initialisation, autotuning) and their
  // detail explains that; they are left out of the overhead measurement.
  int64_t warmup_steps = 2;
  // Steady steps per window: as many as the GPU window and trace.json show
  // by default (--gpu-steps, --trace-steps), so both fall inside it.
  int64_t window_steps = 5;
  // Light steps measured before the cost of the detail is estimated: the
  // median of three is robust to one slow step.
  int64_t light_probe_steps = 3;
  // The share of the run's time the detail may cost: the budget
  // is "a few percent" for the whole profiler, of which the sampler and
  // the skeleton take about one.
  double budget = 0.02;
  // Detail found within the budget stays on, but is measured again after
  // this many detailed steps, then after twice as many each time it stays
  // within (up to max_recheck_steps): a probe of three steps on a noisy
  // machine can find a costly detail cheap (seen: tiny_ops' +50 % measured
  // as under 2 % once), and the probes' light steps cost nothing.
  int64_t recheck_steps = 20;
  int64_t max_recheck_steps = 640;
  // The cost is judged by its upper bound, the measured cost plus this many
  // standard errors of it: a probe of a few steps that vary by ~20 % from
  // one to the next (main-process loading under the Python sampler)
  // measures the noise, not the detail, and would keep a costly detail on
  // by chance. Steps that vary little (a few percent) move the bound by as
  // little.
  double cost_confidence = 2.0;
  // 0: windows sized by the measured cost, as above. Else a window of
  // window_steps opens every lockstep_period steps (a rank of a job: the
  // same steps on every rank), the cost measured but not followed.
  int64_t lockstep_period = 0;
};

// The period of the ranks' fixed schedule: the costliest detail measured
// (tiny_ops: a step +65 % slower, docs/overhead.md), over the 6 steps a
// reopened window details (its first carries the switch), stays within the
// 2 % budget: 6 * 0.65 / 0.02 = 195. Detail cheaper than that costs less.
constexpr int64_t kLockstepPeriod = 200;

// Decides, at each step boundary, whether the next step is detailed.
class DetailPolicy {
 public:
  explicit DetailPolicy(DetailPolicyOptions o = {}) : o_(o) {}

  // A step ended at t_ns (a boundary: Optimizer.step / ProfilerStep end).
  // Returns whether detail is on for the step that starts now.
  // HELD: something else needs the detail on now (the GPU window, whose
  // trace's operators and per-layer GPU times need ours): it stays on,
  // unmeasured; once let go, the held stretch counts as a window, and a
  // window of the usual steps follows it and is measured. Not on the fixed
  // schedule, which every rank must keep.
  bool on_boundary(int64_t t_ns, bool held = false) {
    const int64_t d = last_ns_ > 0 ? t_ns - last_ns_ : -1;
    last_ns_ = t_ns;
    ++steps_;
    if (d > 0 && steps_ > o_.warmup_steps) {  // the step-to-step noise, warm-up left out
      recent_[recent_next_ % kNoiseSteps] = d;
      ++recent_next_;
    }
    if (o_.lockstep_period > 0) return lockstep(d);
    if (held) {
      held_ = on_ = true;
      return true;
    }
    if (held_) {
      held_ = false;
      ++windows_;
      detailed_.clear();
      light_.clear();
      continuous_ = false;
      open();
      return on_;
    }
    if (on_ && no_room_) {  // the window ends here, whatever its length
      on_ = false;
      continuous_ = false;
      ++windows_;
      light_.clear();
      return false;
    }
    if (on_) {
      ++in_window_;
      // The warm-up steps and the first step of a reopened window (which
      // may still carry the switch) are not measured.
      if (d > 0 && in_window_ > first_measured()) detailed_.push_back(d);
      if (in_window_ >= first_measured() + (continuous_ ? recheck_ : o_.window_steps)) {
        on_ = false;
        ++windows_;
        light_.clear();
      }
      return on_;
    }
    if (d > 0) light_.push_back(d);
    if (static_cast<int64_t>(light_.size()) == o_.light_probe_steps) decide_period();
    if (period_ > 0 && steps_ - window_start_ >= period_) open();
    return on_;
  }

  bool on() const { return on_; }
  // No window opens from now on, and one open now closes at the next
  // boundary: the thread's timeline keeps the room it has left for the
  // light steps' scopes (op_observer_state.h, kLightReserveDivisor). A
  // held stretch (the GPU window) still holds; the fixed schedule of a
  // rank is kept, since every rank must detail the same steps.
  void stop_opening() {
    if (!no_room_) no_room_step_ = steps_ + 1;  // the step this boundary ends, counted from 1
    no_room_ = true;
  }
  bool stopped_opening() const { return no_room_; }
  // The step whose end found no room (stop_opening), -1 while none did.
  int64_t no_room_step() const { return no_room_step_; }
  // From the next boundary on, the fixed schedule of a rank
  // (DetailPolicyOptions::lockstep_period): a process that learns it is a
  // rank only when the script joins its process group (before any step,
  // in a usual script; its boundaries are counted from the run's start
  // all the same, as every rank's are).
  void set_lockstep(int64_t period) {
    o_.lockstep_period = period;
    continuous_ = false;
  }
  // Whether the fixed schedule details the step that starts at the
  // STEPS-th boundary: those before the first window closes (the adaptive
  // policy's first window: warm-up and window_steps), then 1 + window_steps
  // from every lockstep_period-th boundary (a reopened window's first step
  // carries the switch). A function of the count alone: the same on every
  // rank that counts the same boundaries.
  bool lockstep_on(int64_t steps) const {
    return steps < o_.warmup_steps + o_.window_steps || steps % o_.lockstep_period < 1 + o_.window_steps;
  }
  // The cost of the detail last measured (detailed over light median - 1),
  // NaN until measured; its standard error, from the step-to-step noise
  // (0: steps that do not vary); the period chosen from the cost plus
  // cost_confidence errors (0: not yet).
  double measured_cost() const { return cost_; }
  double cost_error() const { return cost_error_; }
  int64_t period() const { return period_; }
  // Detail found within the budget at the last probe: on, rechecked later.
  bool continuous() const { return continuous_; }
  int64_t steps() const { return steps_; }

 private:
  int64_t first_measured() const { return windows_ == 0 ? o_.warmup_steps : 1; }

  // The fixed schedule's boundary: the step times are kept as the adaptive
  // policy keeps them, and the cost measured from them (measured_cost), but
  // not followed.
  bool lockstep(int64_t d) {
    const bool was = on_;
    on_ = lockstep_on(steps_);
    period_ = o_.lockstep_period;
    if (was) {
      ++in_window_;
      if (d > 0 && in_window_ > first_measured()) detailed_.push_back(d);
      if (!on_) ++windows_, light_.clear();
    } else {
      if (d > 0) light_.push_back(d);
      if (static_cast<int64_t>(light_.size()) == o_.light_probe_steps && !detailed_.empty()) {
        measure_cost();
        detailed_.clear();
      }
    }
    if (on_ && !was) open();
    return on_;
  }

  // cost_ from the window's last steps against the light probe's.
  void measure_cost() {
    // The window's last steps only, those next to the light steps: in a
    // long window (a recheck's 20 steps and more), a trend in the step time
    // (state that grows) would otherwise be taken for the detail's cost,
    // or hide it (seen: growing_history's +20 % measured as within 2 %).
    if (static_cast<int64_t>(detailed_.size()) > o_.window_steps)
      detailed_.erase(detailed_.begin(), detailed_.end() - static_cast<std::ptrdiff_t>(o_.window_steps));
    const double det = static_cast<double>(middle_value(detailed_));
    const double light = static_cast<double>(middle_value(light_));
    cost_ = light > 0 ? std::max(0.0, det / light - 1.0) : 0.0;
    // A median of n steps whose relative noise is sigma errs by about
    // 1.25 sigma / sqrt(n); the cost is a ratio of two such medians.
    cost_error_ = 1.25 * relative_noise() *
                  std::sqrt(1.0 / static_cast<double>(detailed_.size()) + 1.0 / static_cast<double>(light_.size()));
  }

  // The steps' relative noise from one step to the next: the median of the
  // successive differences of the last kNoiseSteps steps (a slow trend and
  // the few switches between detailed and light steps move it little),
  // scaled to a standard deviation, over their median.
  double relative_noise() const {
    const int64_t n = std::min<int64_t>(recent_next_, kNoiseSteps);
    if (n < 4) return 0.0;
    std::vector<int64_t> v, diffs;
    for (int64_t i = recent_next_ - n; i < recent_next_; ++i) v.push_back(recent_[i % kNoiseSteps]);
    for (size_t i = 1; i < v.size(); ++i) diffs.push_back(std::llabs(v[i] - v[i - 1]));
    const double mid = static_cast<double>(middle_value(v));
    // |x - y| of two normal draws: median 0.954 sigma.
    return mid > 0 ? static_cast<double>(middle_value(diffs)) / 0.954 / mid : 0.0;
  }

  void decide_period() {
    if (detailed_.empty()) {  // the window had no measurable step: try again after a short gap
      period_ = steps_ - window_start_ + o_.window_steps;
      return;
    }
    measure_cost();
    detailed_.clear();
    const double bound = cost_ + o_.cost_confidence * cost_error_;
    if (bound <= o_.budget) {
      // Detail costs less than the budget: keep it on, and measure it again
      // later, less often each time it is found cheap.
      recheck_ = continuous_ ? std::min(2 * recheck_, o_.max_recheck_steps) : o_.recheck_steps;
      continuous_ = true;
      period_ = 0;
      open();
      return;
    }
    continuous_ = false;
    // A reopened window details 1 + window_steps steps (its first carries
    // the switch): the period is sized by all of them. Sized by the
    // window_steps alone, the detail cost 6/5 of the budget.
    const double p = std::ceil(static_cast<double>(1 + o_.window_steps) * bound / o_.budget);
    period_ = std::max<int64_t>(static_cast<int64_t>(p), first_measured() + o_.window_steps + o_.light_probe_steps);
  }

  void open() {
    if (no_room_ && o_.lockstep_period == 0) {
      on_ = false;
      return;
    }
    on_ = true;
    in_window_ = 0;
    window_start_ = steps_;
  }

  DetailPolicyOptions o_;
  bool on_ = true;
  bool held_ = false;
  bool no_room_ = false;  // stop_opening
  int64_t no_room_step_ = -1;
  bool continuous_ = false;
  int64_t last_ns_ = 0;
  int64_t steps_ = 0;
  int64_t in_window_ = 0;
  int64_t windows_ = 0;       // windows closed so far
  int64_t window_start_ = 0;  // steps_ when the current (or last) window opened
  int64_t period_ = 0;
  int64_t recheck_ = 0;  // while continuous_: detailed steps before the next probe
  double cost_ = NAN;
  double cost_error_ = 0.0;
  // The last kNoiseSteps step times, a ring (relative_noise).
  static constexpr int64_t kNoiseSteps = 32;
  int64_t recent_[kNoiseSteps] = {};
  int64_t recent_next_ = 0;
  std::vector<int64_t> detailed_;
  std::vector<int64_t> light_;
};

// The switch the collectors read on their hot paths (a relaxed load): on
// while detail is recorded. With --detail=full it stays on.
struct DetailWindow {
  std::atomic<bool> on{true};
  // Called after each switch, at the step boundary that made it (from the
  // operator observer's callback, any thread, maybe without the GIL): the
  // nn.Module scopes schedule their hooks' removal or return
  // (collect/python/module_scopes.cc). Null when nothing follows.
  std::atomic<void (*)()> on_change{nullptr};
  // Set when the script calls torch.compile (module_scopes.cc): detail is
  // on from the next boundary to the end, as with --detail=full; the
  // compiled regions are counted per call from the module hooks, which
  // stay registered for Dynamo's sake anyway.
  std::atomic<bool> keep_on{false};
  // Set while the GPU window is to come or open (python/torchneck/
  // gpu_window.py): detail stays on until it closes (DetailPolicy's HELD).
  std::atomic<bool> held{false};
};

inline DetailWindow& detail_window() {
  static DetailWindow w;
  return w;
}

}  // namespace torchneck
