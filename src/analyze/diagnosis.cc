#include "analyze/diagnosis.h"

#include "analyze/detectors/shared_thresholds.h"
#include "model/processes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <set>
#include <unordered_map>

namespace torchneck {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Frames that mean "this stack is loading data".
bool is_data_root(const PyFunctionStats& f) {
  if (f.function == "__getitem__" || f.function == "__getitems__") return true;
  if (ends_with(f.file, "torch/utils/data/dataloader.py") && (f.function == "__next__" || f.function == "_next_data"))
    return true;
  return f.function.find("collate") != std::string::npos;
}

void data_functions_from_samples(const Run& run, DiagnosisInput& in) {
  std::unordered_map<uint32_t, int64_t> self;
  for (const SampledStack& s : run.stacks) {
    if (s.frames.empty()) continue;
    const bool data = std::any_of(s.frames.begin(), s.frames.end(),
                                  [&](uint32_t f) { return f < run.python.size() && is_data_root(run.python[f]); });
    if (data) self[s.frames.back()] += s.weight_ns;
  }
  for (const auto& [f, ns] : self) {
    const PyFunctionStats& p = run.python[f];
    in.data_functions.push_back({p.function, p.file, p.line, ns});
    in.data_python_ns += ns;
  }
}

// Trace mode has no stacks: everything reachable in the call graph from a
// data-loading root counts (a function also called elsewhere is counted
// whole: an over-estimate, acceptable for ranking).
void data_functions_from_calls(const Run& run, DiagnosisInput& in) {
  std::vector<std::vector<uint32_t>> callees(run.python.size());
  for (uint32_t f = 0; f < run.python.size(); ++f)
    for (const CallerEdge& c : run.python[f].callers)
      if (c.caller < run.python.size()) callees[c.caller].push_back(f);
  std::vector<bool> seen(run.python.size(), false);
  std::deque<uint32_t> queue;
  for (uint32_t f = 0; f < run.python.size(); ++f)
    if (is_data_root(run.python[f])) {
      seen[f] = true;
      queue.push_back(f);
    }
  while (!queue.empty()) {
    const uint32_t f = queue.front();
    queue.pop_front();
    const PyFunctionStats& p = run.python[f];
    in.data_functions.push_back({p.function, p.file, p.line, p.self_ns});
    in.data_python_ns += p.self_ns;
    for (uint32_t c : callees[f])
      if (!seen[c]) {
        seen[c] = true;
        queue.push_back(c);
      }
  }
}

std::string balanced_verdict(const StepAnalysis& s) {
  if (s.step_ns <= 0) return "No training steps were found, so no bottleneck can be named.";
  std::string v = "No dominant bottleneck: a step (" + fmt_ms(s.step_ns) + " on average) splits into";
  for (int p = 0; p < kNumPhases; ++p) {
    if (p == static_cast<int>(Phase::kEvaluation) && s.breakdown.ns[p] == 0) continue;
    v += std::string(p ? ", " : " ") + phase_name(static_cast<Phase>(p)) + " " +
         fmt_pct(share(s.breakdown.ns[p], s.step_ns));
  }
  return v + ".";
}

}  // namespace

double loading_cpu_fraction(const DiagnosisInput& in) {
  if (in.data_wait_cpu_fraction >= 0) return in.data_wait_cpu_fraction;
  const double data = share(in.steps.breakdown[Phase::kData], in.steps.step_ns);
  if (in.main_cpu_fraction < 0 || data <= 0) return -1;
  return std::clamp((in.main_cpu_fraction - (1.0 - data)) / data, 0.0, 1.0);
}

namespace {

// What other work took of the machine over the run (DiagnosisInput::other_cores).
void set_machine_load(const Run& run, DiagnosisInput& in) {
  const RunInfo& r = run.run;
  if (r.wall_s <= 0) return;
  if (r.machine_cpu_s >= 0 && r.process_cpu_s >= 0) {
    double job = r.process_cpu_s;
    for (const ProcessInfo& p : in.workers) job += std::max(0.0, p.cpu_s);
    in.other_cores = std::max(0.0, r.machine_cpu_s - job) / r.wall_s;
  }
  if (r.machine_steal_s >= 0 && run.env.cpu_cores > 0)
    in.steal_share = r.machine_steal_s / (r.wall_s * static_cast<double>(run.env.cpu_cores));
}

// The share of the training loop the main thread spent runnable but waiting
// for a CPU: from its first step clock to its last (the script's imports,
// set-up and the workers' start are not the loop); -1 without two of them.
double loop_runqueue_fraction(const Run& run) {
  const StepClock* first = nullptr;
  const StepClock* last = nullptr;
  for (const StepClock& c : run.step_clocks) {
    if (c.thread_index != run.main_thread || c.runqueue_ns < 0) continue;
    if (first == nullptr || c.t_ns < first->t_ns) first = &c;
    if (last == nullptr || c.t_ns > last->t_ns) last = &c;
  }
  if (first == nullptr || last->t_ns <= first->t_ns) return -1;
  const auto waited = static_cast<double>(last->runqueue_ns - first->runqueue_ns);
  return std::clamp(waited / static_cast<double>(last->t_ns - first->t_ns), 0.0, 1.0);
}

}  // namespace

DiagnosisInput diagnosis_input(const Run& run, const StepAnalysis& steps, const LayerAnalysis& layers) {
  DiagnosisInput in;
  in.env = run.env;
  in.python_mode = run.run.python_mode;
  in.steps = steps;
  in.layers = layers.layers;
  if (run.run.main_thread_cpu_s >= 0 && run.run.wall_s > 0) {
    // Runnable time counts as computing: preemption on a busy machine is
    // not the loading waiting for I/O.
    const double wanted = run.run.main_thread_cpu_s + std::max(0.0, run.run.main_thread_runqueue_s);
    in.main_cpu_fraction = std::min(1.0, wanted / run.run.wall_s);
    if (run.run.main_thread_runqueue_s >= 0) in.main_runqueue_fraction = run.run.main_thread_runqueue_s / run.run.wall_s;
  }
  if (const double loop = loop_runqueue_fraction(run); loop >= 0) in.main_runqueue_fraction = loop;
  // Of the fetches' time off the run queue, the share on a CPU: on a busy
  // host a loader that sleeps also waits for a core after each wake-up, and
  // one that computes waits for it in the middle; neither wait is the loading's.
  const int64_t off_runqueue = run.data_wait_ns - std::max<int64_t>(0, run.data_wait_runqueue_ns);
  if (run.data_wait_ns > 0 && run.data_wait_cpu_ns >= 0 && off_runqueue > 0)
    in.data_wait_cpu_fraction =
        std::clamp(static_cast<double>(run.data_wait_cpu_ns) / static_cast<double>(off_runqueue), 0.0, 1.0);
  for (const auto& p : run.processes)
    if (p.role != ProcessRole::kMain) in.workers.push_back(p);
  in.workers_alive_at_once = peak_alive_workers(run.processes);
  set_machine_load(run, in);
  int64_t worker_busy = 0;
  for (const auto& f : run.worker_python) worker_busy += f.self_ns;
  if (!run.worker_python.empty() && worker_busy > 0) {
    in.worker_top_function = short_function_label(run.worker_python.front());
    in.worker_top_share = share(run.worker_python.front().self_ns, worker_busy);
  }
  in.memory = analyze_memory(run, steps);
  in.gc = analyze_gc(run, steps);
  in.growing_graphs = run.growing_graphs;
  if (run.run.python_mode == PythonMode::kSample) data_functions_from_samples(run, in);
  else if (run.run.python_mode == PythonMode::kTrace) data_functions_from_calls(run, in);
  std::sort(in.data_functions.begin(), in.data_functions.end(), [](const DataFunction& a, const DataFunction& b) {
    return a.self_ns != b.self_ns ? a.self_ns > b.self_ns : a.function < b.function;
  });
  return in;
}

namespace {

// Fewer steps after warm-up than this cannot tell a bottleneck from a
// one-off: findings stay low, and the verdict says so.
constexpr size_t kMinStepsToDecide = 3;
// The mean step's relative standard error (StepAnalysis::mean_error): within
// 5 % over 20 steps or more is high confidence, within 15 % over 5 or more
// is medium; anything else is low.
constexpr double kHighConfidenceError = 0.05;
constexpr size_t kHighConfidenceSteps = 20;
constexpr double kMediumConfidenceError = 0.15;
constexpr size_t kMediumConfidenceSteps = 5;

// Too few steps to tell a bottleneck from a one-off. A run with no
// iterations at all (one whole-run span: inference, a script with no loop
// torchneck recognises) is judged on its aggregates instead.
bool undecided(const StepAnalysis& steps) {
  return steps.steady_count < kMinStepsToDecide && steps.source != "whole_run" && steps.step_ns > 0;
}

void set_confidence(Diagnosis& d, const StepAnalysis& steps) {
  const size_t n = steps.steady_count;
  const double error = n > 1 ? steps.mean_error : 1.0;
  int level = n >= kHighConfidenceSteps && error <= kHighConfidenceError       ? 2
              : n >= kMediumConfidenceSteps && error <= kMediumConfidenceError ? 1
                                                                               : 0;
  char basis[256];
  int used = std::snprintf(basis, sizeof basis,
                           "%zu step%s after warm-up, step time varying %.0f %% (mean known within %.0f %%)", n,
                           n == 1 ? "" : "s", 100 * steps.step_cv, 100 * 1.96 * error);
  // On a busy machine the shares themselves move with the neighbours' load.
  if (d.load.busy() && used > 0 && static_cast<size_t>(used) < sizeof basis) {
    std::snprintf(basis + used, sizeof basis - static_cast<size_t>(used),
                  "; one level lower: the loop waited for a CPU %.0f %% of its time", 100 * d.load.cpu_wait_share);
    level = std::max(0, level - 1);
  }
  static const char* const kLevels[] = {"low", "medium", "high"};
  const char* const confidence = kLevels[level];
  for (Finding& f : d.findings) {
    f.confidence = confidence;
    f.confidence_basis = basis;
    if (undecided(steps) && f.severity != Severity::kLow) {
      f.severity = Severity::kLow;
      f.confidence_basis += "; too few steps to decide: shown as low";
    }
  }
}

}  // namespace

void finish_diagnosis(Diagnosis& d, const StepAnalysis& steps) {
  set_confidence(d, steps);
  std::stable_sort(d.findings.begin(), d.findings.end(), [](const Finding& a, const Finding& b) {
    const double ga = a.estimated_gain_pct.value_or(-1), gb = b.estimated_gain_pct.value_or(-1);
    if (ga != gb) return ga > gb;
    return a.severity < b.severity;
  });
  // The verdict names the most important finding: the first high-severity
  // one in gain order, else the first medium one (low ones are remarks).
  const Finding* main = nullptr;
  for (const Finding& f : d.findings)
    if (f.severity == Severity::kHigh) {
      main = &f;
      break;
    }
  if (main == nullptr)
    for (const Finding& f : d.findings)
      if (f.severity == Severity::kMedium) {
        main = &f;
        break;
      }
  if (main == nullptr && !d.findings.empty() && undecided(steps)) {
    d.verdict = "Undecided: only " + std::to_string(steps.steady_count) +
                " step(s) after warm-up, too few to name a bottleneck (run more steps); the leading candidate is " +
                d.findings.front().id + ".";
  } else if (main == nullptr) {
    d.verdict = balanced_verdict(steps);
  } else {
    d.verdict = main->title + ".";
    if (main->estimated_gain_pct) {
      // Whole percents: the estimate is "about" what the fix is computed to
      // achieve, or "up to" (gain_is_upper_bound), as its gain_arithmetic says.
      char buf[64];
      std::snprintf(buf, sizeof buf,
                    main->gain_is_upper_bound ? " Fixing it could cut step time by up to %.0f %%."
                                              : " Fixing it should cut step time by about %.0f %%.",
                    *main->estimated_gain_pct);
      d.verdict += buf;
    }
  }
  if (d.load.busy()) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  " Measured on a busy machine: the loop waited for a CPU %.0f %% of the run, and every time here "
                  "includes that wait.",
                  100 * d.load.cpu_wait_share);
    d.verdict += buf;
  }
}

std::vector<Finding> run_detectors(const DiagnosisInput& in, Evidence evidence) {
  std::vector<Finding> out;
  for (const RegisteredDetector& d : detectors())
    if (d.evidence == evidence) d.detect(in, out);
  return out;
}

void combine_findings(Diagnosis& d, const std::vector<Finding>& gpu_findings, const StepAnalysis& steps) {
  std::set<std::string> gpu_ids;
  for (const Finding& f : gpu_findings) gpu_ids.insert(f.id);
  std::erase_if(d.findings, [&](const Finding& f) { return gpu_ids.count(f.id) > 0; });
  d.findings.insert(d.findings.end(), gpu_findings.begin(), gpu_findings.end());
  finish_diagnosis(d, steps);
}

bool MachineLoad::busy() const { return cpu_wait_share >= thresholds::kContendedRunqueueShare; }

Diagnosis diagnose(const DiagnosisInput& in) {
  Diagnosis d;
  d.load = {in.main_runqueue_fraction, in.other_cores, in.steal_share, in.env.cpu_cores};
  d.findings = run_detectors(in, Evidence::kCpu);
  for (Finding& f : run_detectors(in, Evidence::kRanks)) d.findings.push_back(std::move(f));
  combine_findings(d, run_detectors(in, Evidence::kGpu), in.steps);
  return d;
}

}  // namespace torchneck
