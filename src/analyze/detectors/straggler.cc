// straggler: one rank's own time (data wait + compute) is longer than the
// others', and the others wait for it in the collectives (analyze/cross_rank.h).
// Judged on arrival-based waits, not phase times: under DDP every rank's
// backward lasts as long as the slowest one's.
#include <algorithm>
#include <utility>

#include "analyze/diagnosis.h"
#include "analyze/cross_rank.h"
#include "core/stats.h"

namespace torchneck {
namespace {

// A fifth of the step: ranks doing the same work on one machine differ by
// up to 12 % measured (2 ranks of DDP on 2 cores, each with gloo's worker
// threads, under torch 2.6: the rank that shares its core with the other's
// threads); a fifth is a rank doing more.
constexpr double kStragglerShare = 0.20;
// Two fifths: the job runs at the straggler's pace by that much.
constexpr double kStragglerHighShare = 0.40;
// The others' wait must account for at least half the straggler's extra
// time: otherwise the extra time was hidden (overlapped) and costs nobody.
constexpr double kWaitAccounts = 0.5;
// Of its extra time, the part that says why: more than half.
constexpr double kReasonShare = 0.5;
// The whole run's sign over the detailed steps' (see detect_straggler): a
// correction of the windows' estimate, not a new one.
constexpr double kMaxRunShare = 1.5;

double median_without(const std::vector<RankSummary>& v, size_t skip, double (*get)(const RankSummary&)) {
  std::vector<double> x;
  for (size_t i = 0; i < v.size(); ++i)
    if (i != skip && v[i].steps > 0) x.push_back(get(v[i]));
  return median(std::move(x));
}

// The other ranks' wait for a core per unit of their CPU time (medians,
// in the steps the waits are measured in); 0 where unknown.
double others_wait_per_cpu(const std::vector<RankSummary>& ranks, size_t skip) {
  const double cpu = median_without(ranks, skip, [](const RankSummary& x) { return x.waited_cpu_ns; });
  const double runqueue = median_without(ranks, skip, [](const RankSummary& x) { return x.waited_runqueue_ns; });
  return cpu > 0 && runqueue > 0 ? runqueue / cpu : 0.0;
}

// The straggler's signs against the other ranks' medians, in the steps the
// waits are measured in: its data wait, compute, main-thread CPU time and
// wait for a core.
struct Signs {
  double data_excess = 0, compute_excess = 0, cpu_excess = 0, runqueue_excess_ns = 0;
  bool clocks = false, runqueue_clocks = false;
  double brought_wait = 0;  // the wait for a core its extra CPU work brings on a busy host
  double host_excess_ns = 0;
};

class Straggler {
 public:
  Straggler(const RankAnalysis& ranks, size_t worst, double excess)
      : all_(ranks), ranks_(ranks.ranks), worst_(worst), s_(ranks.ranks[worst]), excess_(excess) {}

  double excess_of(double (*get)(const RankSummary&)) const {
    return get(s_) - median_without(ranks_, worst_, get);
  }

  // The excess is read from the waits, which are measured in the steps
  // every rank detailed (RankAnalysis::waited_steps): its cause is read from
  // the same steps' signs, its data wait and its main thread's clocks (per
  // step, Run::step_clocks): computing, waiting for a core, or neither.
  Signs read_signs() const {
    Signs g;
    g.data_excess = excess_of([](const RankSummary& x) { return x.waited_data_ns; });
    g.compute_excess = excess_of([](const RankSummary& x) { return x.compute_ns; });
    g.clocks = !s_.device_work && std::all_of(ranks_.begin(), ranks_.end(), [](const RankSummary& x) {
      return x.steps == 0 || (x.cpu_ns >= 0 && x.waited_cpu_ns >= 0);
    });
    g.runqueue_clocks = std::all_of(ranks_.begin(), ranks_.end(), [](const RankSummary& x) {
      return x.steps == 0 || (x.runqueue_ns >= 0 && x.waited_runqueue_ns >= 0);
    });
    g.cpu_excess = g.clocks ? excess_of([](const RankSummary& x) { return x.waited_cpu_ns; }) : 0;
    if (g.runqueue_clocks) {
      g.runqueue_excess_ns = excess_of([](const RankSummary& x) { return x.waited_runqueue_ns; });
    } else {
      const double others = median_without(ranks_, worst_, [](const RankSummary& x) { return x.runqueue_share; });
      if (s_.runqueue_share >= 0 && others >= 0) g.runqueue_excess_ns = (s_.runqueue_share - others) * s_.step_ns;
    }
    // On a host whose cores are all busy, every rank waits for a core in
    // proportion to what it computes: extra CPU work brings its own wait.
    // Only the wait beyond the others' rate per unit of CPU time is the host's.
    const double contention = g.clocks && g.runqueue_clocks ? others_wait_per_cpu(ranks_, worst_) : 0.0;
    g.brought_wait = std::max(g.cpu_excess, 0.0) * contention;
    g.host_excess_ns = g.runqueue_excess_ns - g.brought_wait;
    return g;
  }

  // The same sign over every compared step (data wait and the clocks are
  // known in every step, the waits only in the detailed ones): the excess
  // over the run is the detailed steps' times what the whole run shows of
  // that sign against them (a ratio estimator). Under detail windows the
  // steps every rank detailed are few, the first window's among them
  // (warm-up's tail), where ranks of equal work can differ by a third on a
  // busy machine while the whole run's CPU times agree: the detailed
  // steps' excess alone would name a straggler that is not there, or read
  // a real one short. At most kMaxRunShare: the sign is at least half the
  // detailed steps' excess (the cause's rule), so the ratio stays a correction.
  bool windows() const { return all_.waited_steps > 0 && all_.waited_steps < all_.steps; }
  double run_share(double all, double detailed) const {
    return !windows() || detailed <= 0 ? 1.0 : std::clamp(all / detailed, 0.0, kMaxRunShare);
  }

  // The cause ("input", "host", "blocked", "compute"), its fix, and how much
  // of the detailed steps' excess the whole run supports.
  void name_cause(const Signs& g, std::string& why, std::string& fix, double& support) const {
    const std::string rank = std::to_string(s_.rank);
    const double own_extra = std::max(excess_ - g.data_excess, 1.0);
    support = 1.0;
    if (g.data_excess >= kReasonShare * excess_) {
      why = "input";
      support = run_share(excess_of([](const RankSummary& x) { return x.data_ns; }), g.data_excess);
      fix = "give rank " + rank + "'s DataLoader what the others have (num_workers, storage, the same sampler "
            "share), or look at that rank's input pipeline on its own: torchneck's rank-" + rank + " report";
    } else if (g.host_excess_ns >= kReasonShare * own_extra) {
      why = "host";
      if (g.runqueue_clocks)
        support = run_share(excess_of([](const RankSummary& x) { return x.runqueue_ns; }), g.runqueue_excess_ns);
      fix = "rank " + rank + "'s process waits for a CPU core: other work on its cores, or too many threads for "
            "them (pin each rank to its own cores, torch.set_num_threads per rank)";
    } else if (g.clocks && g.cpu_excess + g.brought_wait < kReasonShare * own_extra) {
      // Its main thread computes no more than the others' and waits no
      // longer for a core: the extra time is off the CPU.
      why = "blocked";
      fix = "rank " + rank + " does the others' work but its main thread is off the CPU longer: blocked (a lock, "
            "file or network I/O, a device it waits on; its sampled stacks in torchneck's rank-" + rank +
            " report say where), or its core runs slower (a VM's stolen time: top's 'st', a lower clock); move "
            "it to other cores or another node";
    } else {
      why = "compute";
      // Its sign: the time it wanted a core (CPU time and, where known, its
      // wait for one), which its extra work costs whether or not the host
      // is busy, where CPU time alone shrinks as the host gets busier.
      if (g.clocks && g.runqueue_clocks)
        support = run_share(excess_of([](const RankSummary& x) { return x.cpu_ns + x.runqueue_ns; }),
                            g.cpu_excess + g.runqueue_excess_ns);
      else if (g.clocks)
        support = run_share(excess_of([](const RankSummary& x) { return x.cpu_ns; }), g.cpu_excess);
      fix = "rank " + rank + " computes more per step than the others: an uneven split of the work (larger "
            "batches or longer sequences on it), extra work only it does (logging, metrics, hooks on rank " +
            rank + "), or a slower device";
    }
  }

  void add_evidence(Finding& f, const Signs& g, const std::string& why, double others_wait, double support) const {
    const std::string rank = std::to_string(s_.rank);
    const double others_data = median_without(ranks_, worst_, [](const RankSummary& x) { return x.data_ns; });
    f.evidence.push_back("rank " + rank + ": data wait " + fmt_ms(static_cast<int64_t>(s_.data_ns)) + ", compute " +
                         fmt_ms(static_cast<int64_t>(s_.compute_ns)) + " per step; the other ranks' median: data " +
                         fmt_ms(static_cast<int64_t>(others_data)) + ", compute " +
                         fmt_ms(static_cast<int64_t>(s_.compute_ns - g.compute_excess)));
    f.evidence.push_back("the other ranks wait " + fmt_ms(static_cast<int64_t>(others_wait)) +
                         " per step in collectives for the last rank to arrive; rank " + rank + " waits " +
                         fmt_ms(static_cast<int64_t>(s_.wait_ns)) + " and arrives last at " + fmt_pct(s_.last_share) +
                         " of " + std::to_string(all_.matched) + " collectives");
    if (g.clocks)
      f.evidence.push_back(
          "its main thread's CPU time " + fmt_ms(static_cast<int64_t>(s_.waited_cpu_ns)) + " per step, the others' median " +
          fmt_ms(static_cast<int64_t>(s_.waited_cpu_ns - g.cpu_excess)) +
          (g.runqueue_clocks ? "; waiting for a CPU " + fmt_ms(static_cast<int64_t>(s_.waited_runqueue_ns)) +
                                   ", the others " +
                                   fmt_ms(static_cast<int64_t>(s_.waited_runqueue_ns - g.runqueue_excess_ns))
                             : std::string()) +
          " (schedstat at each step's end" + (windows() ? ", in the steps the waits are measured in)" : ")"));
    else if (why == "host")
      f.evidence.push_back("its main thread waited for a CPU " + fmt_pct(s_.runqueue_share) + " of the run, " +
                           fmt_ms(static_cast<int64_t>(g.runqueue_excess_ns)) + " per step more than the others");
    f.evidence.push_back("by arrival times at the collectives, not by phase times: with DDP every rank's backward "
                         "lasts as long as the slowest one's");
    if (windows())
      f.evidence.push_back("the waits are measured in the " + std::to_string(all_.waited_steps) +
                           " steps every rank detailed (" + fmt_ms(static_cast<int64_t>(excess_)) + " more there); " +
                           (why == "blocked"
                                ? std::string("time off the CPU has no sign of its own in the other steps to check it by")
                                : "over all " + std::to_string(all_.steps) + " steps its " +
                                      (why == "input" ? "data wait" : why == "host" ? "wait for a CPU" : "main thread's CPU time") +
                                      " shows " + fmt_pct(support) + " of that"));
  }

  const RankAnalysis& all_;
  const std::vector<RankSummary>& ranks_;
  const size_t worst_;
  const RankSummary& s_;
  const double excess_;  // in the detailed steps
};

}  // namespace

void detect_straggler(const DiagnosisInput& in, std::vector<Finding>& out) {
  if (in.ranks == nullptr || in.ranks->empty() || in.ranks->steps == 0) return;
  const std::vector<RankSummary>& ranks = in.ranks->ranks;
  size_t worst = 0;
  double excess = -1;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].steps == 0) continue;
    const double e = ranks[r].own_ns() - median_without(ranks, r, [](const RankSummary& s) { return s.own_ns(); });
    if (e > excess) excess = e, worst = r;
  }
  const RankSummary& s = ranks[worst];
  const double step = s.step_ns;
  double others_wait = median_without(ranks, worst, [](const RankSummary& x) { return x.wait_ns; });
  if (step <= 0 || excess < kStragglerShare * step || others_wait < kWaitAccounts * excess) return;

  const Straggler straggler(*in.ranks, worst, excess);
  const Signs g = straggler.read_signs();
  std::string why, fix;
  double support = 1.0;
  straggler.name_cause(g, why, fix, support);
  excess *= support;
  others_wait *= support;
  if (excess < kStragglerShare * step) return;
  Finding f = make_finding(FindingId::straggler);
  f.rank = s.rank;
  f.numbers.push_back({"excess_ms", excess / 1e6});
  f.title = "Rank " + std::to_string(s.rank) + " holds the others back: its own work takes " +
            fmt_ms(static_cast<int64_t>(excess)) + " more per step (" + why + ")";
  if (excess >= kStragglerHighShare * step) f.severity = Severity::kHigh;
  straggler.add_evidence(f, g, why, others_wait, support);
  f.recommendation = fix;
  const double saved = std::min(excess, others_wait);
  f.estimated_gain_pct = 100.0 * saved / step;
  f.gain_arithmetic = "the others' wait for it, " + fmt_ms(static_cast<int64_t>(saved)) + " of a " +
                      fmt_ms(static_cast<int64_t>(step)) + " step: the step if rank " + std::to_string(s.rank) +
                      " ran like the median rank";
  // Over every compared step, as the evidence shows it (the data wait is
  // known in each): the cause's share of the run-wide excess.
  f.numbers.push_back({"data_excess_ms", straggler.excess_of([](const RankSummary& x) { return x.data_ns; }) / 1e6});
  f.numbers.push_back({"compute_excess_ms", g.compute_excess / 1e6});
  if (g.clocks) f.numbers.push_back({"cpu_excess_ms", g.cpu_excess / 1e6});
  f.cause = why;
  out.push_back(std::move(f));
}

}  // namespace torchneck
