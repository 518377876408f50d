// slow_data_transform: which Python functions inside data loading
// (Dataset.__getitem__, transforms, collate) cost most.
#include <algorithm>

#include "analyze/detectors/shared_thresholds.h"
#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

// Only worth naming when data loading matters (see input_bound) and one
// function holds a real part of it.
constexpr double kDataShareForTransforms = 0.15;
constexpr double kTopFunctionShareOfData = 0.10;
constexpr size_t kFunctionsShown = 3;
// A vectorised rewrite (tensor ops instead of Python loops) is typically
// an order of magnitude faster: we assume 10x, i.e. 90 % of its time saved.
constexpr double kVectorisedSaving = 0.9;

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

void detect_slow_data_transform(const DiagnosisInput& in, std::vector<Finding>& out) {
  const StepAnalysis& s = in.steps;
  const int64_t T = s.step_ns;
  if (T <= 0 || in.data_functions.empty() || in.data_python_ns <= 0) return;
  if (share(s.breakdown[Phase::kData], T) < kDataShareForTransforms) return;
  // Loading that mostly waits (sleep, I/O) is not made faster by cheaper
  // Python: input_bound covers it.
  const double loading_cpu = loading_cpu_fraction(in);
  if (loading_cpu >= 0 && loading_cpu < thresholds::kLoadingWaitsBelowCpu) return;
  const DataFunction& top = in.data_functions.front();
  if (share(top.self_ns, in.data_python_ns) < kTopFunctionShareOfData) return;
  const double steps = static_cast<double>(std::max<size_t>(1, s.steps.size()));
  Finding f = make_finding(FindingId::slow_data_transform);
  f.title = "Data loading time is spent in " + top.function + " (" + base_name(top.file) + ":" +
            std::to_string(top.line) + ")";
  int64_t shown = 0;
  for (size_t i = 0; i < in.data_functions.size() && i < kFunctionsShown; ++i) {
    const DataFunction& d = in.data_functions[i];
    shown += d.self_ns;
    f.evidence.push_back(d.function + " (" + base_name(d.file) + ":" + std::to_string(d.line) + "): " +
                         fmt_ms(static_cast<int64_t>(static_cast<double>(d.self_ns) / steps)) + " per step, " +
                         fmt_pct(share(d.self_ns, in.data_python_ns)) + " of Python time in data loading");
  }
  f.recommendation = "Vectorise " + top.function +
                     " (whole-tensor torch/numpy ops instead of per-element Python), or run it in DataLoader "
                     "workers (num_workers > 0) so it overlaps the training step";
  const double per_step = static_cast<double>(shown) / steps;
  const double gain = kVectorisedSaving * per_step / static_cast<double>(T);
  f.estimated_gain_pct = 100.0 * std::min(gain, share(s.breakdown[Phase::kData], T));
  f.gain_arithmetic = "top functions " + fmt_ms(static_cast<int64_t>(per_step)) + " per step x " +
                      fmt_pct(kVectorisedSaving) + " (assuming a " +
                      std::to_string(static_cast<int>(1.0 / (1.0 - kVectorisedSaving) + 0.5)) +
                      "x faster vectorised version) / step " + fmt_ms(T);
  out.push_back(std::move(f));
}

}  // namespace torchneck
