#include "analyze/cross_rank.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "analyze/gpu/hta.h"
#include "core/stats.h"
#include "model/collectives.h"
#include "model/run_enums.h"

namespace torchneck {
namespace {

struct Interval {
  int64_t lo, hi;
};

// Sorted, disjoint.
std::vector<Interval> unite(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  std::vector<Interval> out;
  for (const Interval& x : v) {
    if (x.hi <= x.lo) continue;
    if (!out.empty() && x.lo <= out.back().hi) out.back().hi = std::max(out.back().hi, x.hi);
    else out.push_back(x);
  }
  return out;
}

// The first interval of the sorted, disjoint V that ends after T.
size_t first_after(const std::vector<Interval>& v, int64_t t) {
  return static_cast<size_t>(std::upper_bound(v.begin(), v.end(), t, [](int64_t x, const Interval& i) {
                               return x < i.hi;
                             }) - v.begin());
}

// |(A within [lo, hi)) minus B|, A and B sorted and disjoint.
int64_t measure_minus(const std::vector<Interval>& a, const std::vector<Interval>& b, int64_t lo, int64_t hi) {
  int64_t total = 0;
  size_t j = first_after(b, lo);
  for (size_t i = first_after(a, lo); i < a.size() && a[i].lo < hi; ++i) {
    int64_t x = std::max(a[i].lo, lo);
    const int64_t end = std::min(a[i].hi, hi);
    while (x < end) {
      while (j < b.size() && b[j].hi <= x) ++j;
      if (j >= b.size() || b[j].lo >= end) {
        total += end - x;
        break;
      }
      if (b[j].lo > x) total += b[j].lo - x;
      x = b[j].hi;
    }
  }
  return total;
}

// Each rank's completed collectives by name, in the order it started them.
using ByName = std::map<std::string, std::vector<const CollectiveEvent*>>;

ByName by_name(const Run& run) {
  ByName out;
  for (const CollectiveEvent& c : run.collectives) {
    const std::string& name = c.name_id < run.strings.size() ? run.strings[c.name_id] : std::string("?");
    out[name].push_back(&c);
  }
  for (auto& [name, v] : out)
    std::stable_sort(v.begin(), v.end(),
                     [](const CollectiveEvent* x, const CollectiveEvent* y) { return x->start_ns < y->start_ns; });
  return out;
}

// What the rank itself was doing while its collectives ran, on its clock
// plus OFFSET: its operators and its data waits on the threads
// that run the step and issue collectives; when the collectives are device
// kernels (a trace of NCCL), its device work other than communication, which
// is what a kernel waiting for the other ranks holds back.
std::vector<Interval> own_work(const Run& run, int64_t offset) {
  std::vector<Interval> busy;
  if (run.collectives_on_device) {
    for (const Activity& e : run.activities.events)
      if (is_gpu_work(e.cat) && gpu::kernel_type(run.activities.name_of(e)) != gpu::KernelType::kCommunication)
        busy.push_back({e.ts_ns + offset, e.end_ns() + offset});
    return unite(std::move(busy));
  }
  std::set<uint32_t> own_threads = {run.main_thread};
  for (const CollectiveEvent& c : run.collectives) own_threads.insert(c.thread_index);
  // Not the user's scopes (record_function, ProfilerStep#N): they mark
  // time, they do no work; one around the whole step would hide every wait.
  // The DataLoader's scope is the rank's data wait, its own time.
  auto own = [&](const OpEvent& e) {
    if (e.kind != OpKind::kUserScope) return true;
    return e.name_id < run.strings.size() && run.strings[e.name_id].rfind("enumerate(DataLoader)", 0) == 0;
  };
  for (const OpEvent& e : run.timeline)
    if (own_threads.count(e.thread_index) && own(e)) busy.push_back({e.start_ns + offset, e.end_ns + offset});
  return unite(std::move(busy));
}

// The main thread's step clocks (Run::step_clocks), by time.
std::vector<StepClock> main_clocks(const Run& run) {
  std::vector<StepClock> v;
  for (const StepClock& c : run.step_clocks)
    if (c.thread_index == run.main_thread) v.push_back(c);
  std::sort(v.begin(), v.end(), [](const StepClock& x, const StepClock& y) { return x.t_ns < y.t_ns; });
  return v;
}

// A cumulative clock of V (StepClock::*FIELD) at time t, linear between the
// boundaries around it (exact at a boundary); -1 outside them or unknown.
double clock_at(const std::vector<StepClock>& v, int64_t t, int64_t StepClock::*field) {
  auto hi = std::lower_bound(v.begin(), v.end(), t, [](const StepClock& c, int64_t x) { return c.t_ns < x; });
  if (hi == v.end()) return -1;
  if (hi->t_ns == t) return (*hi).*field < 0 ? -1 : static_cast<double>((*hi).*field);
  if (hi == v.begin()) return -1;
  const StepClock& a = *(hi - 1);
  const StepClock& b = *hi;
  if (a.*field < 0 || b.*field < 0) return -1;
  const double f = static_cast<double>(t - a.t_ns) / static_cast<double>(b.t_ns - a.t_ns);
  return static_cast<double>(a.*field) + f * static_cast<double>(b.*field - a.*field);
}

// Of the COMPARED steps (steady on every rank), those whose every rank's
// operators are known: all of them without detail windows; under windows,
// the indices below COMMON detailed on every rank and steady or left out
// for the detail's cost (Step::detail_excluded) on every rank.
std::vector<size_t> steps_known_to_every_rank(const std::vector<const Run*>& runs,
                                              const std::vector<const StepAnalysis*>& steps, size_t common,
                                              const std::vector<size_t>& compared) {
  const bool windows = std::any_of(runs.begin(), runs.end(), [](const Run* r) { return r->detail_mode == "window"; });
  if (!windows) return compared;
  std::vector<size_t> out;
  for (size_t i = 0; i < common; ++i) {
    bool known = true;
    for (const StepAnalysis* a : steps) {
      const Step& st = a->steps[i];
      known = known && st.detailed && (st.steady || st.detail_excluded);
    }
    if (known) out.push_back(i);
  }
  return out;
}

// Each rank's own facts (how it ended, its run queue, its device work) and
// its collectives by name; the hosts the ranks ran on.
void describe_ranks(const std::vector<const Run*>& runs, RankAnalysis& a, std::vector<ByName>& names,
                    std::set<std::string>& hosts) {
  for (size_t r = 0; r < runs.size(); ++r) {
    const Run& run = *runs[r];
    RankSummary& s = a.ranks[r];
    s.rank = run.rank.rank;
    s.host = run.rank.host;
    s.ending = to_string(run.run.ending);
    s.exit_code = run.run.exit_code;
    if (run.run.main_thread_runqueue_s >= 0 && run.run.wall_s > 0)
      s.runqueue_share = run.run.main_thread_runqueue_s / run.run.wall_s;
    s.end_unix_s = run.run.start_unix_s + run.run.wall_s;
    s.device_work = run.gpu_window.state == GpuWindowState::kRecorded || run.collectives_on_device ||
                    !run.activities.devices.empty();
    s.collectives = run.collectives.size();
    for (const CollectiveEvent& c : run.collectives) s.collective_bytes += std::max<int64_t>(0, c.bytes);
    names[r] = by_name(run);
    hosts.insert(run.rank.host);
  }
}

// The first rank to fail names the crash; the others' endings follow it
// (torchrun stops them, or their collectives fail).
void name_first_failure(RankAnalysis& a) {
  const RankSummary* first = nullptr;
  for (const RankSummary& s : a.ranks) {
    // A trace (torchneck analyze) says nothing of how its rank ended.
    const bool ok = s.exit_code == 0 && (s.ending == "finished" || s.ending == "sys.exit" || s.ending == "trace");
    if (!ok && (first == nullptr || s.end_unix_s < first->end_unix_s)) first = &s;
  }
  if (first == nullptr) return;
  a.first_failure = first->rank;
  char buf[160];
  // A rank whose profile is its last periodic spill was ended with no
  // chance to write its report (SIGKILL: the out-of-memory killer, a
  // scheduler): its exit status is unknown, and its end is that spill's.
  const bool spill = first->ending == "still running";
  a.failure = "rank " + std::to_string(first->rank) + " failed first: " +
              (spill ? "killed with no report (SIGKILL or out of memory?), its last spill read"
                     : first->ending + ", exit status " + std::to_string(first->exit_code));
  for (const RankSummary& s : a.ranks)
    if (&s != first) {
      std::snprintf(buf, sizeof buf, "; rank %lld ended %.2f s %s (%s)", static_cast<long long>(s.rank),
                    s.end_unix_s - first->end_unix_s, spill ? "after that spill" : "later", s.ending.c_str());
      a.failure += buf;
    }
}

// The operations every rank took part in: the k-th of each name. A rank
// that started more of one is said in a note.
std::map<std::string, size_t> common_operations(std::vector<ByName>& names, RankAnalysis& a) {
  std::map<std::string, size_t> common;
  for (const auto& [name, v] : names[0]) {
    size_t k = v.size();
    for (size_t r = 1; r < names.size(); ++r) {
      auto it = names[r].find(name);
      k = std::min(k, it == names[r].end() ? size_t{0} : it->second.size());
    }
    if (k > 0) common[name] = k;
  }
  for (size_t r = 0; r < names.size(); ++r)
    for (const auto& [name, v] : names[r])
      if (v.size() != (common.count(name) ? common[name] : 0)) {
        a.notes.push_back("rank " + std::to_string(a.ranks[r].rank) + " started " + std::to_string(v.size()) +
                          " " + name + ", more than every rank did: the extra ones are not compared");
        break;
      }
  return common;
}

// One time axis: on one host the ranks share CLOCK_MONOTONIC; across
// hosts, a collective completes at about the same instant everywhere.
void align_clocks(const std::set<std::string>& hosts, const std::map<std::string, size_t>& common,
                  std::vector<ByName>& names, RankAnalysis& a) {
  const size_t n = names.size();
  a.clock_offset_ns.assign(n, 0);
  if (hosts.size() <= 1 && hosts.count("") == 0) {
    a.clock = "one host: the ranks' monotonic clocks are one clock";
    return;
  }
  for (size_t r = 1; r < n; ++r) {
    std::vector<double> d;
    for (const auto& [name, k] : common)
      for (size_t i = 0; i < k; ++i) {
        const CollectiveEvent* x = names[0][name][i];
        const CollectiveEvent* y = names[r][name][i];
        if (x->end_ns > 0 && y->end_ns > 0) d.push_back(static_cast<double>(x->end_ns - y->end_ns));
      }
    a.clock_offset_ns[r] = static_cast<int64_t>(median(d));
  }
  const std::string where = hosts.count("") != 0 ? std::string("hosts not known (traces)")
                                                 : std::to_string(hosts.size()) + " hosts";
  a.clock = "aligned on the collectives' completions (" + where +
            ": each rank's clock shifted by the median difference of their end times to rank " +
            std::to_string(a.ranks[0].rank) + "'s)";
}

// Per rank, on the common clock: the time its part of each operation waited
// for the last arrival, and the whole of each operation.
struct RankCollectiveTimes {
  std::vector<std::vector<Interval>> waits, comms;
};

// One operation NAME's K occurrences compared across the ranks into ST;
// the waits and transfers into TIMES, the last to arrive counted.
void compare_operation(const std::string& name, size_t k, std::vector<ByName>& names, RankAnalysis& a,
                       RankCollectiveTimes& times, std::vector<uint64_t>& last_count, CollectiveStats& st) {
  const size_t n = names.size();
  int64_t bytes = 0, known = 0;
  double duration = 0, wait = 0, transfer = 0;
  uint64_t samples = 0;
  for (size_t i = 0; i < k; ++i) {
    int64_t last = INT64_MIN;
    size_t last_rank = 0;
    bool complete = true;
    for (size_t r = 0; r < n; ++r) {
      const CollectiveEvent* c = names[r][name][i];
      const int64_t arrive = c->start_ns + a.clock_offset_ns[r];
      if (arrive > last) last = arrive, last_rank = r;
      if (c->end_ns <= 0) complete = false;
    }
    if (names[0][name][i]->bytes >= 0) bytes += names[0][name][i]->bytes, ++known;
    if (!complete) continue;
    ++a.matched;
    ++last_count[last_rank];
    for (size_t r = 0; r < n; ++r) {
      const CollectiveEvent* c = names[r][name][i];
      const int64_t arrive = c->start_ns + a.clock_offset_ns[r];
      const int64_t end = c->end_ns + a.clock_offset_ns[r];
      if (last > arrive) times.waits[r].push_back({arrive, std::min(last, end)});
      times.comms[r].push_back({arrive, end});
      duration += static_cast<double>(end - arrive);
      wait += static_cast<double>(std::max<int64_t>(0, std::min(last, end) - arrive));
      transfer += static_cast<double>(std::max<int64_t>(0, end - std::max(last, arrive)));
      ++samples;
    }
  }
  if (known > 0) st.bytes_per_call = bytes / known;
  if (samples > 0) {
    st.duration_ns = duration / static_cast<double>(samples);
    st.wait_ns = wait / static_cast<double>(samples);
    st.transfer_ns = transfer / static_cast<double>(samples);
  }
}

RankCollectiveTimes compare_collectives(const std::map<std::string, size_t>& common, std::vector<ByName>& names,
                                        RankAnalysis& a) {
  const size_t n = names.size();
  RankCollectiveTimes times;
  times.waits.resize(n);
  times.comms.resize(n);
  std::vector<uint64_t> last_count(n, 0);
  for (const auto& [name, k] : common) {
    CollectiveStats st;
    st.name = name;
    st.kind = std::string(collective_kind(name));
    st.calls = k;
    compare_operation(name, k, names, a, times, last_count, st);
    a.collectives.push_back(st);
  }
  std::sort(a.collectives.begin(), a.collectives.end(), [](const CollectiveStats& x, const CollectiveStats& y) {
    return x.duration_ns * static_cast<double>(x.calls) > y.duration_ns * static_cast<double>(y.calls);
  });
  for (size_t r = 0; r < n; ++r)
    a.ranks[r].last_share = a.matched > 0 ? static_cast<double>(last_count[r]) / static_cast<double>(a.matched) : 0;
  return times;
}

// The steps every rank has, by index (collectives keep ranks in lockstep),
// that are steady on every rank.
std::vector<size_t> steady_on_every_rank(const std::vector<const StepAnalysis*>& steps, size_t* common_steps) {
  *common_steps = SIZE_MAX;
  for (const StepAnalysis* s : steps) *common_steps = std::min(*common_steps, s->steps.size());
  std::vector<size_t> compared;
  for (size_t i = 0; i < *common_steps; ++i) {
    bool steady = true;
    for (const StepAnalysis* s : steps) steady = steady && s->steps[i].steady;
    if (steady) compared.push_back(i);
  }
  return compared;
}

// A step's data wait and its main thread's clocks, summed over steps.
struct StepSigns {
  double data = 0, cpu = 0, runqueue = 0;
  bool cpu_known = true, runqueue_known = true;

  void add(const Step& st, const std::vector<StepClock>& clocks) {
    data += static_cast<double>(st.breakdown[Phase::kData]);
    const double c0 = clock_at(clocks, st.start_ns, &StepClock::cpu_ns);
    const double c1 = clock_at(clocks, st.end_ns, &StepClock::cpu_ns);
    const double q0 = clock_at(clocks, st.start_ns, &StepClock::runqueue_ns);
    const double q1 = clock_at(clocks, st.end_ns, &StepClock::runqueue_ns);
    cpu_known = cpu_known && c0 >= 0 && c1 >= 0;
    runqueue_known = runqueue_known && q0 >= 0 && q1 >= 0;
    cpu += c1 - c0;
    runqueue += q1 - q0;
  }
};

// Rank R's step split into data, waiting, transfer and compute: its step and
// data over the COMPARED steps, its waits over the WAITED ones; each waited
// step's wait added to STEP_WAIT, averaged over the ranks.
void time_rank_steps(const Run& run, const StepAnalysis& steps, size_t r, const std::vector<size_t>& compared,
                     const std::vector<size_t>& waited, const RankCollectiveTimes& times, RankAnalysis& a,
                     std::vector<double>& step_wait) {
  const int64_t offset = a.clock_offset_ns[r];
  const std::vector<Interval> busy = own_work(run, offset);
  const std::vector<Interval> wait = unite(times.waits[r]);
  const std::vector<Interval> comm = unite(times.comms[r]);
  const std::vector<StepClock> clocks = main_clocks(run);
  double step = 0, w = 0, all = 0;
  StepSigns every, in_waited;
  for (size_t i : compared) {
    every.add(steps.steps[i], clocks);
    step += static_cast<double>(steps.steps[i].duration());
  }
  for (size_t j = 0; j < waited.size(); ++j) {
    const Step& st = steps.steps[waited[j]];
    const int64_t lo = st.start_ns + offset, hi = st.end_ns + offset;
    const auto ws = static_cast<double>(measure_minus(wait, busy, lo, hi));
    w += ws;
    in_waited.add(st, clocks);
    step_wait[j] += ws / static_cast<double>(a.ranks.size());
    all += static_cast<double>(measure_minus(comm, busy, lo, hi));
  }
  const double k = static_cast<double>(compared.size());
  const double kw = static_cast<double>(waited.size());
  RankSummary& s = a.ranks[r];
  s.steps = compared.size();
  s.step_ns = step / k;
  s.data_ns = every.data / k;
  s.wait_ns = w / kw;
  s.transfer_ns = std::max(0.0, all - w) / kw;
  s.compute_ns = std::max(0.0, s.step_ns - s.data_ns - s.wait_ns - s.transfer_ns);
  if (every.cpu_known) s.cpu_ns = every.cpu / k;
  if (every.runqueue_known) s.runqueue_ns = every.runqueue / k;
  s.waited_data_ns = in_waited.data / kw;
  if (in_waited.cpu_known) s.waited_cpu_ns = in_waited.cpu / kw;
  if (in_waited.runqueue_known) s.waited_runqueue_ns = in_waited.runqueue / kw;
}

// Under detail windows a rank's operators are known in its windows only,
// and outside them the time it computed while a collective was pending
// (DDP's all-reduce under backward) would pass for waiting: its waits are
// measured in the steps every rank detailed (the same on every rank: a
// rank's windows are on a fixed schedule, core/detail_window.h), steady
// or left out of the time statistics for the detail's cost (which every
// rank carries alike), the rest of its step over every compared step.
void time_steps(const std::vector<const Run*>& runs, const std::vector<const StepAnalysis*>& steps,
                const RankCollectiveTimes& times, RankAnalysis& a) {
  size_t common_steps = 0;
  const std::vector<size_t> compared = steady_on_every_rank(steps, &common_steps);
  a.steps = compared.size();
  if (compared.empty()) {
    a.notes.push_back("no step is steady on every rank: the ranks' steps are not compared");
    return;
  }
  const std::vector<size_t> wait_steps = steps_known_to_every_rank(runs, steps, common_steps, compared);
  if (wait_steps.size() != compared.size()) {
    if (wait_steps.empty())
      a.notes.push_back("no step was detailed on every rank: the collectives' waits include what the ranks "
                        "computed meanwhile outside their detail windows");
    else
      a.notes.push_back("the collectives' waits are over the " + std::to_string(wait_steps.size()) +
                        " steps every rank detailed (its own operators known), the rest over all " +
                        std::to_string(compared.size()));
  }
  const std::vector<size_t>& waited = wait_steps.empty() ? compared : wait_steps;
  std::vector<double> step_wait(waited.size(), 0.0);  // the ranks' mean wait, step by step
  for (size_t r = 0; r < runs.size(); ++r) time_rank_steps(*runs[r], *steps[r], r, compared, waited, times, a, step_wait);
  a.waited_steps = waited.size();
  a.typical_wait_ns = median(step_wait);
}

}  // namespace

RankAnalysis analyze_ranks(const std::vector<const Run*>& runs, const std::vector<const StepAnalysis*>& steps) {
  RankAnalysis a;
  const size_t n = runs.size();
  if (n < 2) return a;
  a.ranks.resize(n);
  std::vector<ByName> names(n);
  std::set<std::string> hosts;
  describe_ranks(runs, a, names, hosts);
  if (runs[0]->rank.world_size > static_cast<int64_t>(n))
    a.notes.push_back(std::to_string(n) + " of the job's " + std::to_string(runs[0]->rank.world_size) +
                      " ranks: the waits are for the last of these to arrive, the other ranks unseen");
  name_first_failure(a);
  const std::map<std::string, size_t> common = common_operations(names, a);
  align_clocks(hosts, common, names, a);
  const RankCollectiveTimes times = compare_collectives(common, names, a);
  time_steps(runs, steps, times, a);
  return a;
}

}  // namespace torchneck
