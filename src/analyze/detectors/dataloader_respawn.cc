// dataloader_respawn: a DataLoader with worker processes and
// persistent_workers=False starts them again at every `for batch in loader`
// (every epoch): each start forks or spawns the processes, rebuilds their
// Dataset copy and prefetch queue, and the loop waits for the first batch.
#include <algorithm>
#include <functional>
#include <limits>

#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

// Start methods that inherit nothing: each worker imports torch, the script's
// modules and unpickles the Dataset again at every start (seconds, not the
// milliseconds of a fork), which makes the restarts worth a medium finding.
bool starts_from_scratch(const std::string& start_method) {
  return start_method == "spawn" || start_method == "forkserver";
}

// Measured restart waits of a tenth of the training loop's time are worth a
// medium finding whatever the start method.
constexpr double kCostlyRestartShare = 0.10;

struct RestartWait {
  int64_t restarts = 0;   // epochs after the first
  int64_t waited_ns = 0;  // what persistent workers would save, all restarts together
  int64_t steps_ns = 0;   // all steps in the window
  bool measured() const { return waited_ns > 0 && steps_ns > 0; }
};

// The first batch of each epoch waits for the restarted workers. With one
// DataLoader with workers, its restarts are the training loop's epochs, and
// the `restarts` steps after the first (whose start any DataLoader pays)
// with the longest data waits are theirs. Each such step pays the old
// workers' shutdown (the epoch's last, StopIteration fetch), the new ones'
// start (iter(loader), outside any fetch) and the first batch: its whole
// excess over a typical step, less what an epoch's first batch costs with
// persistent workers too (one batch's production, its prefetch queue
// emptied), is what persistent workers save. Nothing when that cannot be told: several
// DataLoaders (a validation loader restarts outside the steps), steps the
// timeline window lost, or worker counts that are no whole number of starts
// (then not measured()).
RestartWait restart_wait(const DiagnosisInput& in, int64_t once, int64_t restarted, double batch_s) {
  const StepAnalysis& s = in.steps;
  RestartWait r;
  if (once <= 0 || restarted % once != 0 || s.timeline_truncated) return r;
  const size_t restarts = static_cast<size_t>(restarted / once);
  if (s.steps.size() <= restarts + 1) return r;
  std::vector<size_t> later;  // steps after the first, by data wait, longest first
  r.restarts = static_cast<int64_t>(restarts);
  for (size_t i = 0; i < s.steps.size(); ++i) {
    r.steps_ns += s.steps[i].duration();
    if (i > 0) later.push_back(i);
  }
  std::partial_sort(later.begin(), later.begin() + static_cast<std::ptrdiff_t>(restarts), later.end(),
                    [&](size_t a, size_t b) { return s.steps[a].breakdown[Phase::kData] > s.steps[b].breakdown[Phase::kData]; });
  const int64_t first_batch_ns = std::max<int64_t>(0, static_cast<int64_t>(batch_s * 1e9) - s.breakdown[Phase::kData]);
  for (size_t i = 0; i < restarts; ++i)
    r.waited_ns += std::max<int64_t>(0, s.steps[later[i]].duration() - s.typical_ns - first_batch_ns);
  return r;
}

}  // namespace

void detect_dataloader_respawn(const DiagnosisInput& in, std::vector<Finding>& out) {
  // One start of every DataLoader with workers makes `once` processes; a
  // restart of a non-persistent one adds at least its num_workers more.
  int64_t once = 0;
  int64_t loaders_with_workers = 0;
  int64_t smallest_restart = std::numeric_limits<int64_t>::max();
  const DataLoaderFacts* loader = nullptr;  // the first that restarts its workers
  for (const DataLoaderFacts& d : in.env.dataloaders) {
    if (d.num_workers <= 0) continue;
    once += d.num_workers;
    ++loaders_with_workers;
    if (d.persistent_workers) continue;
    smallest_restart = std::min(smallest_restart, d.num_workers);
    if (loader == nullptr) loader = &d;
  }
  if (loader == nullptr) return;
  const int64_t seen = static_cast<int64_t>(in.workers.size());
  const int64_t restarted = seen - once;
  if (restarted < smallest_restart) return;
  bool from_scratch = false;
  double wall = 0, busy = 0;
  uint64_t batches = 0;
  for (const ProcessInfo& p : in.workers) {
    from_scratch = from_scratch || starts_from_scratch(p.start_method);
    wall += p.wall_s;
    busy += p.busy_s;
    batches += p.batches;
  }
  const double batch_s = batches > 0 ? busy / static_cast<double>(batches) : 0;
  const RestartWait wait = loaders_with_workers == 1 ? restart_wait(in, once, restarted, batch_s) : RestartWait{};
  const double wait_share = wait.measured() ? share(wait.waited_ns, wait.steps_ns) : 0;
  const std::string where = loader->created_at.empty() ? "" : " (" + loader->created_at + ")";
  Finding f = make_finding(FindingId::dataloader_respawn);
  if (from_scratch || wait_share >= kCostlyRestartShare) f.severity = Severity::kMedium;
  f.title = "DataLoader workers are started again every epoch: " + std::to_string(seen) +
            " worker processes for " + std::to_string(once) + " workers";
  f.evidence.push_back(std::to_string(seen) + " DataLoader worker processes ran; the DataLoaders have " +
                       std::to_string(once) + " workers in all, so " + std::to_string(restarted) +
                       " were started again (DataLoader" + where + ": num_workers=" +
                       std::to_string(loader->num_workers) + ", persistent_workers=False)");
  f.evidence.push_back("each worker process lived " + fmt_ms(static_cast<int64_t>(1e9 * wall / static_cast<double>(seen))) +
                       " and produced " + std::to_string(batches / static_cast<uint64_t>(seen)) +
                       " batches on average" +
                       (from_scratch ? "; started by spawn/forkserver: each start imports torch and the script again"
                                     : ""));
  if (wait.measured())
    f.evidence.push_back("the first steps of the " + std::to_string(wait.restarts) +
                         " epochs after the first (workers shut down, started again, first batch) took " +
                         fmt_ms(wait.waited_ns) + " in all beyond a typical step and one batch's production: " +
                         fmt_pct(wait_share) + " of the " + std::to_string(in.steps.steps.size()) + " steps' time");
  f.recommendation = "DataLoader(..., persistent_workers=True)" + where +
                     ": the workers then live across epochs, keeping their Dataset copy and prefetched batches";
  if (wait.measured()) {
    f.estimated_gain_pct = 100.0 * wait_share;
    f.gain_arithmetic = "restarts " + fmt_ms(wait.waited_ns) + " (the " + std::to_string(wait.restarts) +
                        " steps after the first with the longest data waits, less a typical step and one batch "
                        "each) / all steps " + fmt_ms(wait.steps_ns);
  } else {
    f.gain_arithmetic = "not estimated: no epoch's first batch could be measured (several DataLoaders, steps "
                        "outside the timeline window, or no wait beyond a batch's production)";
  }
  out.push_back(std::move(f));
}

}  // namespace torchneck
