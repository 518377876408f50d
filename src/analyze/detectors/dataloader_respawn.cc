// dataloader_respawn: a DataLoader with worker processes and
// persistent_workers=False starts them again at every `for batch in loader`
// (every epoch): each start forks or spawns the processes, rebuilds their
// Dataset copy and prefetch queue, and the loop waits for the first batch.
#include <algorithm>
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

}  // namespace

void detect_dataloader_respawn(const DiagnosisInput& in, std::vector<Finding>& out) {
  // One start of every DataLoader with workers makes `once` processes; a
  // restart of a non-persistent one adds at least its num_workers more.
  int64_t once = 0;
  int64_t smallest_restart = std::numeric_limits<int64_t>::max();
  const DataLoaderFacts* loader = nullptr;  // the first that restarts its workers
  for (const DataLoaderFacts& d : in.env.dataloaders) {
    if (d.num_workers <= 0) continue;
    once += d.num_workers;
    if (d.persistent_workers) continue;
    smallest_restart = std::min(smallest_restart, d.num_workers);
    if (loader == nullptr) loader = &d;
  }
  if (loader == nullptr) return;
  const int64_t seen = static_cast<int64_t>(in.workers.size());
  const int64_t restarted = seen - once;
  if (restarted < smallest_restart) return;
  bool from_scratch = false;
  double wall = 0;
  uint64_t batches = 0;
  for (const ProcessInfo& p : in.workers) {
    from_scratch = from_scratch || starts_from_scratch(p.start_method);
    wall += p.wall_s;
    batches += p.batches;
  }
  const std::string where = loader->created_at.empty() ? "" : " (" + loader->created_at + ")";
  Finding f = make_finding(FindingId::dataloader_respawn);
  if (from_scratch) f.severity = Severity::kMedium;
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
  f.recommendation = "DataLoader(..., persistent_workers=True)" + where +
                     ": the workers then live across epochs, keeping their Dataset copy and prefetched batches";
  f.gain_arithmetic = "not estimated: the profile does not time a worker's start-up (the wait for each epoch's first batch)";
  out.push_back(std::move(f));
}

}  // namespace torchneck
