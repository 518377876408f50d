// cpu_threads_underused: CPU compute dominates, yet torch uses fewer
// intra-op threads than the cores the process may run on.
#include <algorithm>

#include "analyze/detectors/shared_thresholds.h"
#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

// Compute-bound: forward + backward + optimizer at least half the step, on
// operators large enough (mean >= 50 us) for intra-op parallelism to pay.
constexpr double kComputeShare = 0.5;
constexpr double kParallelOpUs = 50.0;

}  // namespace

void detect_cpu_threads_underused(const DiagnosisInput& in, std::vector<Finding>& out) {
  if (in.env.cuda || in.env.torch_threads <= 0 || in.env.torch_threads >= in.env.cpu_cores) return;
  // The cores torch does not use may be the DataLoader workers' (or taken
  // by other work: the loop waited for a CPU): then there is none to give,
  // and the advice would contradict core_contention's.
  int64_t workers = 0;
  for (const auto& d : in.env.dataloaders) workers = std::max(workers, d.num_workers);
  const int64_t spare = in.env.cpu_cores - workers;
  if (spare <= in.env.torch_threads || in.main_runqueue_fraction >= thresholds::kContendedRunqueueShare) return;
  const StepAnalysis& s = in.steps;
  const int64_t T = s.step_ns;
  if (T <= 0 || s.ops_per_step <= 0) return;
  const int64_t compute = s.breakdown.compute();
  const double mean_op_us = s.op_self_ns_per_step / s.ops_per_step / 1000.0;
  if (share(compute, T) < kComputeShare || mean_op_us < kParallelOpUs) return;
  Finding f = make_finding(FindingId::cpu_threads_underused);
  f.title = "torch uses " + std::to_string(in.env.torch_threads) + " of " + std::to_string(in.env.cpu_cores) +
            " usable CPU cores for compute-bound operators";
  f.evidence.push_back("torch.get_num_threads() = " + std::to_string(in.env.torch_threads) + ", " +
                       std::to_string(in.env.cpu_cores) + " cores in the process's affinity mask");
  f.evidence.push_back("forward + backward + optimizer are " + fmt_pct(share(compute, T)) +
                       " of the step; mean operator self time " + std::to_string(static_cast<int64_t>(mean_op_us)) + " us");
  f.recommendation = "torch.set_num_threads(" + std::to_string(spare) +
                     ") at the start of the script (or OMP_NUM_THREADS=" + std::to_string(spare) + ")" +
                     (workers > 0 ? ": the cores left beside the " + std::to_string(workers) + " DataLoader workers"
                                  : ", leaving cores for DataLoader workers if you add them");
  // How much the operators scale with threads depends on their kernels and
  // sizes: no number is promised without measuring it.
  f.gain_arithmetic = "not estimated: intra-op scaling depends on the operators; measure it: torchneck run --try threads=" +
                      std::to_string(spare);
  f.try_setting = "threads=" + std::to_string(spare);
  out.push_back(std::move(f));
}

}  // namespace torchneck
