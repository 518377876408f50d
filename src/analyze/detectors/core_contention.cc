// core_contention: the main process (its torch threads) and the DataLoader
// workers want more CPU than the cores give. The loop then waits for a core
// in every phase, and each operator's time is inflated by the wait: the
// per-layer and per-operator numbers are distorted, not only slower.
#include <algorithm>

#include "analyze/detectors/shared_thresholds.h"
#include "analyze/diagnosis.h"

namespace torchneck {

using thresholds::kContendedRunqueueShare;

void detect_core_contention(const DiagnosisInput& in, std::vector<Finding>& out) {
  if (in.main_runqueue_fraction < kContendedRunqueueShare) return;
  const int64_t cores = std::max<int64_t>(1, in.env.cpu_cores);
  // The script's own doing: its worker processes and torch threads are
  // more than the cores. Waiting with fewer is other work on the machine,
  // not a setting of the script to change.
  int64_t loader_workers = 0;
  for (const auto& d : in.env.dataloaders) loader_workers = std::max(loader_workers, d.num_workers);
  // Workers compete only with those alive at the same time: a training
  // loader's and an evaluation loader's made after it never do.
  const int64_t alive = in.workers_alive_at_once;
  const int64_t wanted = std::max(loader_workers, alive) + std::max<int64_t>(1, in.env.torch_threads);
  if (wanted <= cores) return;
  Finding f = make_finding(FindingId::core_contention);
  f.title = "The training loop waits for a CPU core " + fmt_pct(in.main_runqueue_fraction) +
            " of the training loop: processes and threads compete for " + std::to_string(cores) + " cores";
  f.evidence.push_back("the main thread was runnable but not running " + fmt_pct(in.main_runqueue_fraction) +
                       " of the training loop's wall time, first to last step (Linux schedstat)");
  int64_t workers = 0;
  double worker_cpu = 0;
  for (const auto& p : in.workers) {
    ++workers;
    worker_cpu += std::max(0.0, p.cpu_s);
  }
  std::string who = std::to_string(in.env.torch_threads) + " torch intra-op thread(s)";
  if (workers > 0)
    who += " and " + std::to_string(alive) + " DataLoader worker process(es) at once" +
           (workers > alive ? " (" + std::to_string(workers) + " in all, not all alive together)" : "");
  f.evidence.push_back(who + " on " + std::to_string(cores) + " usable cores" +
                       (workers > 0 ? "; the workers used " + fmt_ms(static_cast<int64_t>(worker_cpu * 1e9)) + " of CPU" : ""));
  f.evidence.push_back("every phase's time includes this waiting: per-layer and per-operator times are inflated by it");
  const int64_t threads = std::max<int64_t>(1, cores - std::min<int64_t>(alive, cores - 1));
  f.recommendation = workers > 0
                         ? "keep workers + torch threads within the cores: torch.set_num_threads(" + std::to_string(threads) +
                               ") with " + std::to_string(alive) + " workers, or fewer workers; stop other work on the machine"
                         : "stop other work on the machine, or torch.set_num_threads(" + std::to_string(threads) +
                               ") if other threads of the script compete";
  f.gain_arithmetic = "none promised: the wait is spread over every phase, and fewer threads may compute slower";
  out.push_back(std::move(f));
}

}  // namespace torchneck
