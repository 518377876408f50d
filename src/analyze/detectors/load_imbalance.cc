// load_imbalance: the ranks wait for one another a large share of the step,
// but no one rank is always the late one (straggler names a rank that is):
// the work per step differs from rank to rank and step to step (batches of
// different sizes, sequences of different lengths).
#include <algorithm>

#include "analyze/diagnosis.h"
#include "analyze/cross_rank.h"

namespace torchneck {
namespace {

// Ranks of equal work on one machine wait for one another up to ~7 % of
// the step (measured: 2 ranks of DDP on 2 cores); 15 % is work that differs.
// In the mean step and in the median one: work that differs makes most
// steps wait, where a rank descheduled once (2 noisy cores) makes one step
// wait long, and over the 5 steps of a short run's detail window (the
// ranks' fixed schedule, core/detail_window.h) that one step alone had
// carried the mean over 15 % of a balanced job's step.
constexpr double kImbalanceWaitShare = 0.15;
// And the late rank changes: one rank last at 7 in 10 of the collectives
// or more is the one late rank, which straggler judges, over the whole run
// where the waits are known in the detail windows only (a balanced 2-rank
// job had one rank last at 9 of the first window's 12); an imbalance of two
// ranks' work changes the late rank about every other collective.
constexpr double kOneLateRankShare = 0.7;

}  // namespace

void detect_load_imbalance(const DiagnosisInput& in, std::vector<Finding>& out) {
  if (in.ranks == nullptr || in.ranks->empty() || in.ranks->steps == 0) return;
  for (const Finding& f : out)
    if (f.id == "straggler") return;  // one rank explains the waits
  double wait = 0, step = 0, last_max = 0;
  size_t n = 0;
  for (const RankSummary& s : in.ranks->ranks) {
    if (s.steps == 0) continue;
    wait += s.wait_ns;
    step += s.step_ns;
    last_max = std::max(last_max, s.last_share);
    ++n;
  }
  if (n < 2) return;
  wait /= static_cast<double>(n);
  step /= static_cast<double>(n);
  const double typical = in.ranks->typical_wait_ns;
  if (step <= 0 || wait < kImbalanceWaitShare * step || typical < kImbalanceWaitShare * step ||
      last_max >= kOneLateRankShare)
    return;
  Finding f = make_finding(FindingId::load_imbalance);
  f.title = "The ranks wait " + fmt_pct(wait / step) + " of each step for one another, and the late rank changes";
  std::string last;
  for (const RankSummary& s : in.ranks->ranks)
    last += (last.empty() ? "" : ", ") + std::string("rank ") + std::to_string(s.rank) + " " + fmt_pct(s.last_share);
  f.evidence.push_back("mean wait in collectives for the last rank to arrive " + fmt_ms(static_cast<int64_t>(wait)) +
                       " of a " + fmt_ms(static_cast<int64_t>(step)) + " step, not overlapped by work; " +
                       fmt_ms(static_cast<int64_t>(typical)) + " in the median step");
  f.evidence.push_back("last to arrive: " + last + " of " + std::to_string(in.ranks->matched) + " collectives");
  f.recommendation = "even out the work per rank and step: the same batch size everywhere (drop_last=True), "
                     "sequences bucketed by length, a DistributedSampler over a shuffled dataset";
  f.estimated_gain_pct = 100.0 * wait / step;
  f.gain_is_upper_bound = true;
  f.gain_arithmetic = "the mean wait, " + fmt_ms(static_cast<int64_t>(wait)) + " of the step (upper bound: equal work)";
  out.push_back(std::move(f));
}

}  // namespace torchneck
