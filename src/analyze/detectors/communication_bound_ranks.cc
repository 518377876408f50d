// communication_bound from the ranks' own collectives (analyze/cross_rank.h): a
// large share of every rank's step is spent transferring in collectives
// that no work of the rank overlaps. The GPU side (communication_bound.cc)
// replaces it on a Kineto trace, which times the kernels themselves.
#include <algorithm>

#include "analyze/diagnosis.h"
#include "analyze/cross_rank.h"

namespace torchneck {
namespace {

// The same fifth of the step as the GPU side (communication_bound.cc).
constexpr double kExposedTransferShare = 0.20;

}  // namespace

void detect_communication_bound_ranks(const DiagnosisInput& in, std::vector<Finding>& out) {
  if (in.ranks == nullptr || in.ranks->empty() || in.ranks->steps == 0) return;
  double transfer = 0, step = 0, min_share = 1;
  size_t n = 0;
  for (const RankSummary& s : in.ranks->ranks) {
    if (s.steps == 0 || s.step_ns <= 0) continue;
    transfer += s.transfer_ns;
    step += s.step_ns;
    min_share = std::min(min_share, s.transfer_ns / s.step_ns);
    ++n;
  }
  if (n < 2) return;
  transfer /= static_cast<double>(n);
  step /= static_cast<double>(n);
  if (transfer < kExposedTransferShare * step) return;
  Finding f = make_finding(FindingId::communication_bound);
  f.title = "Communication takes " + fmt_pct(transfer / step) + " of each rank's step, overlapped by nothing";
  f.evidence.push_back("mean step " + fmt_ms(static_cast<int64_t>(step)) + ", of which " +
                       fmt_ms(static_cast<int64_t>(transfer)) + " transferring in collectives after every rank "
                       "arrived, with no work of the rank beside it (lowest rank: " + fmt_pct(min_share) + ")");
  if (!in.ranks->collectives.empty()) {
    const CollectiveStats& c = in.ranks->collectives.front();
    f.evidence.push_back("most of it " + c.name + ": " + std::to_string(c.calls) + " calls, " +
                         (c.bytes_per_call >= 0 ? fmt_mib(static_cast<double>(c.bytes_per_call)) + " each, " : "") +
                         fmt_ms(static_cast<int64_t>(c.transfer_ns)) + " transfer each");
  }
  f.recommendation = "communicate less often or less: accumulate gradients over micro-batches inside "
                     "model.no_sync(), DDP(bucket_cap_mb=...) and gradient_as_bucket_view=True so buckets "
                     "overlap backward, gradient compression hooks (register_comm_hook)";
  f.gain_arithmetic = "not estimated: depends on how much of it the backward pass can hide";
  out.push_back(std::move(f));
}

}  // namespace torchneck
