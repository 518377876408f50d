// busy_machine: other work on the machine takes the cores. The loop waits for
// a CPU, and what it waits is not the script's: the CPU time of every process
// on the machine (/proc/stat) less this job's own says who took the cores.
// Stated so that no one acts on times that are the neighbours' (core_contention
// is the case where the script's own workers and threads are the crowd).
#include <algorithm>
#include <cstdio>

#include "analyze/detectors/shared_thresholds.h"
#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

using thresholds::kContendedRunqueueShare;

// Other work counts from half a core taken on average over the run: below
// it, the wait is the job's own threads and workers, or the kernel's.
constexpr double kOtherCoresMin = 0.5;
// A virtual machine whose CPUs the hypervisor gives other guests a tenth of
// the time is as crowded, whatever runs inside it.
constexpr double kStealShareMin = 0.10;

}  // namespace

void detect_busy_machine(const DiagnosisInput& in, std::vector<Finding>& out) {
  if (in.main_runqueue_fraction < kContendedRunqueueShare) return;
  const bool others = in.other_cores >= kOtherCoresMin;
  const bool stolen = in.steal_share >= kStealShareMin;
  if (!others && !stolen) return;
  Finding f = make_finding(FindingId::busy_machine);
  const std::string cores = std::to_string(std::max<int64_t>(1, in.env.cpu_cores));
  f.title = "Other work on the machine takes the cores: the loop waited for a CPU " +
            fmt_pct(in.main_runqueue_fraction) + " of the training loop";
  f.evidence.push_back("the main thread was runnable but not running " + fmt_pct(in.main_runqueue_fraction) +
                       " of the training loop's wall time, first to last step (Linux schedstat)");
  if (in.other_cores >= 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "other processes used %.1f of the %s cores on average over the run "
                  "(/proc/stat, less this job's own CPU time)", in.other_cores, cores.c_str());
    f.evidence.push_back(buf);
  }
  if (in.steal_share >= 0.01)
    f.evidence.push_back("a hypervisor gave " + fmt_pct(in.steal_share) + " of the CPUs' time to other guests (steal)");
  f.evidence.push_back("every phase's, layer's and operator's time includes this wait");
  f.recommendation = "profile and train where the cores are the job's own: an idle machine, or cores set apart for "
                     "it (taskset -c, a cgroup cpuset, the scheduler's exclusive allocation); until then read "
                     "the times here as inflated by the wait";
  f.gain_arithmetic = "none promised: at most the " + fmt_pct(in.main_runqueue_fraction) +
                      " of the training loop it waited for a CPU, spread over every phase";
  out.push_back(std::move(f));
}

}  // namespace torchneck
