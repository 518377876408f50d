// input_bound: the main thread waits for the next batch a large share of
// each step (time inside DataLoader __next__).
#include <algorithm>

#include "analyze/detectors/shared_thresholds.h"
#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

using thresholds::kDataWaitHighShareCpuOnly;
using thresholds::kDataWaitShareCpuOnly;
using thresholds::kLoadingWaitsBelowCpu;

// A cap on the workers suggested: each is a process with its own copy of
// the dataset and prefetch_factor batches in memory.
constexpr int64_t kMaxSuggestedWorkers = 8;
// Worker processes busy producing batches at least this share of their
// lifetime are saturated: the pipeline's rate is theirs. Well below it while
// the main loop still waits, the wait is not for their work.
constexpr double kWorkersSaturated = 0.80;
constexpr double kWorkersIdle = 0.50;

// With the workers' own numbers: are they saturated (then more workers, or
// cheaper transforms when no core is left), or mostly idle (then the main
// loop waits for something else, and more workers would not help)?
void with_worker_numbers(const DiagnosisInput& in, Finding& f, int64_t T, int64_t D, int64_t C,
                         int64_t workers, int64_t cores) {
  double wall = 0, busy = 0, batches = 0;
  for (const auto& p : in.workers) {
    wall += p.wall_s;
    busy += p.busy_s;
    batches += static_cast<double>(p.batches);
  }
  const double busy_share = wall > 0 ? busy / wall : 0;
  // CPU time per busy second: a worker that sleeps or waits on I/O while
  // producing needs no core of its own, so more of them help on any machine.
  double cpu = 0;
  bool cpu_known = true;
  for (const auto& p : in.workers) {
    cpu_known = cpu_known && p.cpu_s >= 0;
    cpu += p.cpu_s;
  }
  const bool workers_wait = cpu_known && busy > 0 && cpu / busy < kLoadingWaitsBelowCpu;
  const double per_batch_ms = batches > 0 ? 1e3 * busy / batches : 0;
  f.evidence.push_back(std::to_string(in.workers.size()) + " DataLoader worker processes were busy " +
                       fmt_pct(busy_share) + " of their time producing batches (" +
                       std::to_string(static_cast<int64_t>(batches)) + " batches, " + fmt_ms(static_cast<int64_t>(per_batch_ms * 1e6)) +
                       " each on average)");
  if (!in.worker_top_function.empty())
    f.evidence.push_back("the workers' hottest function while producing batches: " + in.worker_top_function + " (" +
                         fmt_pct(in.worker_top_share) + " of their Python time)");
  const std::string transform =
      in.worker_top_function.empty() ? "the per-sample transforms" : in.worker_top_function;
  if (busy_share >= kWorkersSaturated && workers_wait) {
    // Waiting workers overlap each other: the pipeline delivers `workers`
    // batches per batch time, so the step shrinks with their number, down to
    // the rest of the step.
    f.evidence.push_back("the workers were on a CPU " + fmt_pct(cpu / busy) +
                         " of their producing time: loading waits (I/O, sleep), so more workers need no more cores");
    const int64_t more = std::min<int64_t>(kMaxSuggestedWorkers, std::max<int64_t>(2 * workers, workers + 2));
    f.recommendation = "DataLoader(..., num_workers=" + std::to_string(more) +
                       ", persistent_workers=True): the workers are saturated and wait rather than compute; or make " +
                       transform + " wait less (read fewer, larger files; cache)";
    const int64_t likely = std::max(C, T * workers / more);
    f.try_setting = "num_workers=" + std::to_string(more);
    f.estimated_gain_pct = 100.0 * share(T - likely, T);
    f.gain_arithmetic = "step " + fmt_ms(T) + " x " + std::to_string(workers) + "/" + std::to_string(more) +
                        " workers, at least the rest of the step " + fmt_ms(C) + " -> " + fmt_ms(likely);
  } else if (busy_share >= kWorkersSaturated) {
    // One batch per step is needed; the workers deliver `workers` batches
    // every per_batch time. More workers help only with spare cores (the
    // main process needs one).
    const int64_t spare = cores - 1 - workers;
    if (spare > 0) {
      const int64_t more = std::min<int64_t>(kMaxSuggestedWorkers, workers + spare);
      f.recommendation = "DataLoader(..., num_workers=" + std::to_string(more) +
                         ", persistent_workers=True): the workers are saturated and " + std::to_string(spare) +
                         " core(s) are free; and make " + transform + " cheaper";
      const int64_t likely = C + D * workers / more;
      f.try_setting = "num_workers=" + std::to_string(more);
      f.estimated_gain_pct = 100.0 * share(T - likely, T);
      f.gain_arithmetic = "wait " + fmt_ms(D) + " x " + std::to_string(workers) + "/" + std::to_string(more) +
                          " saturated workers -> step " + fmt_ms(likely);
    } else {
      f.recommendation = "Make " + transform +
                         " cheaper (vectorise it, or precompute it once): the workers are saturated and no core is "
                         "free for more of them (" + std::to_string(cores) + " cores, " + std::to_string(workers) +
                         " workers + the main process)";
      f.gain_arithmetic = "not estimated: depends on how much cheaper the transform gets";
    }
  } else if (busy_share < kWorkersIdle) {
    f.recommendation =
        "More workers would not help: they are idle most of the time while the loop waits. Check what the wait is "
        "made of: worker start-up each epoch (persistent_workers=True), large batches sent between processes "
        "(smaller tensors, uint8 instead of float32, pin_memory), or a sampler/collate in the main process";
    f.gain_arithmetic = "not estimated: the wait is not for the workers' computing";
  } else {
    f.recommendation = "DataLoader(..., persistent_workers=True, prefetch_factor=4) to keep the workers busier, "
                       "and make " + transform + " cheaper";
    f.gain_arithmetic = "not estimated: the workers are busy " + fmt_pct(busy_share) +
                        " of the time, between idle and saturated";
  }
}

}  // namespace

void detect_input_bound(const DiagnosisInput& in, std::vector<Finding>& out) {
  const StepAnalysis& s = in.steps;
  const int64_t T = s.step_ns;
  const int64_t D = s.breakdown[Phase::kData];
  const double part = share(D, T);
  if (T <= 0 || part < kDataWaitShareCpuOnly) return;
  const int64_t C = T - D;  // the rest of the step: what workers can overlap with
  const int64_t cores = std::max<int64_t>(1, in.env.cpu_cores);
  int64_t workers = 0;
  bool pin = false;
  if (!in.env.dataloaders.empty()) {
    workers = in.env.dataloaders.front().num_workers;
    pin = in.env.cuda;
  }
  Finding f = make_finding(FindingId::input_bound);
  if (part >= kDataWaitHighShareCpuOnly) f.severity = Severity::kHigh;
  f.title = "Input-bound: the training loop waits for data " + fmt_pct(part) + " of each step";
  f.evidence.push_back("a step takes " + fmt_ms(T) + " on average, of which " + fmt_ms(D) +
                       " waiting in DataLoader __next__ (" + fmt_pct(part) + ")");
  f.evidence.push_back(std::to_string(s.steady_count) + " steps after warm-up (" + s.source + " boundaries), every one "
                       "counted with its whole time; " + std::to_string(s.excluded) + " warm-up step(s) left out");
  // Batches that arrive in bursts (k workers finish k batches at once):
  // the wait sits in every k-th step, and the steps between find theirs
  // ready.
  for (const SlowGroup& g : s.slow)
    if (g.kind == SlowKind::kPeriodic && g.phase == Phase::kData)
      f.evidence.push_back("batches arrive in bursts: every " + std::to_string(g.period) + " steps one waits " +
                           fmt_ms(g.phase_slow_ns) + " for data, the others " + fmt_ms(g.phase_typical_ns) +
                           (workers > 1 ? " (" + std::to_string(workers) + " workers finish their batches together)" : "") +
                           "; those " + std::to_string(g.steps.size()) + " steps hold " + fmt_pct(g.share) +
                           " of the run beyond a typical step");
  // Workers load batches in parallel with the step. CPU-bound loading can use
  // the cores the main process leaves free; waiting (I/O, sleep) overlaps
  // fully. Unless the main thread's CPU time shows the loading waits, the
  // estimate takes the CPU-bound case, the conservative one.
  const double loading_cpu = loading_cpu_fraction(in);
  const bool waits = loading_cpu >= 0 && loading_cpu < kLoadingWaitsBelowCpu;
  const int64_t suggested = std::clamp<int64_t>(std::max<int64_t>(2, cores), 2, kMaxSuggestedWorkers);
  const int64_t parallel =
      waits ? suggested : std::max<int64_t>(1, std::min<int64_t>(suggested, cores - 1));
  if (loading_cpu >= 0)
    f.evidence.push_back("the main thread was on a CPU (or ready to run, waiting for one) for " + fmt_pct(loading_cpu) +
                         " of its data wait: loading " + (waits ? "mostly waits (I/O, sleep)" : "computes"));
  if (workers == 0) {
    f.evidence.push_back("DataLoader num_workers=0: batches are loaded on the main thread, " +
                         std::to_string(cores) + " CPU cores usable");
    f.recommendation = "DataLoader(..., num_workers=" + std::to_string(suggested) + ", pin_memory=" +
                       (pin ? "True" : "False") + ", persistent_workers=True)";
    const int64_t loading = D;  // with no workers, the wait is the loading cost itself
    const int64_t best = std::max(C, loading / suggested);
    const int64_t likely = std::max(C, loading / parallel);
    f.try_setting = "num_workers=" + std::to_string(suggested);
    f.estimated_gain_pct = 100.0 * share(T - likely, T);
    f.gain_arithmetic = "step " + fmt_ms(T) + " -> max(rest of step " + fmt_ms(C) + ", loading " + fmt_ms(loading) +
                        " / " + std::to_string(parallel) + " parallel worker(s)) = " + fmt_ms(likely);
    if (!waits)
      f.gain_arithmetic += "; " + fmt_ms(best) + " if loading waits rather than computes (all " +
                           std::to_string(suggested) + " workers overlap)";
  } else if (!in.workers.empty()) {
    with_worker_numbers(in, f, T, D, C, workers, cores);
  } else {
    f.evidence.push_back("DataLoader num_workers=" + std::to_string(workers) + " cannot keep up");
    const int64_t more = std::min<int64_t>(kMaxSuggestedWorkers, std::max<int64_t>(workers * 2, cores));
    f.recommendation = "DataLoader(..., num_workers=" + std::to_string(more) +
                       ", persistent_workers=True), and make the per-sample transforms cheaper";
    if (more > workers) {
      // The wait shrinks as the producing rate grows with the worker count.
      const int64_t likely = C + D * workers / more;
      f.try_setting = "num_workers=" + std::to_string(more);
      f.estimated_gain_pct = 100.0 * share(T - likely, T);
      f.gain_arithmetic = "wait " + fmt_ms(D) + " x " + std::to_string(workers) + "/" + std::to_string(more) +
                          " workers -> step " + fmt_ms(likely);
    } else {
      f.gain_arithmetic = "no spare cores for more workers: only cheaper transforms help";
    }
  }
  out.push_back(std::move(f));
}

}  // namespace torchneck
