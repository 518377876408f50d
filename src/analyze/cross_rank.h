// Several ranks of one distributed job, side by side: each rank's step
// split into its own time (data wait, compute) and the time it spent in
// collectives that nothing else overlapped, itself split into the wait for
// the last rank to arrive and the transfer after it; and the collectives
// matched across ranks (the k-th of a name on every rank is one operation).
//
// Why waits and not phase times: with DDP the gradient all-reduce is a
// barrier inside backward, so every rank's backward takes the same wall
// time; a rank that computes 200 ms more and the ranks that wait 200 ms for
// it look alike by phase. Arrival times at the collectives tell them apart:
// the straggler arrives last and waits for nobody.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyze/steps.h"
#include "model/run.h"

namespace torchneck {

// One rank's mean steady step (the steps every rank has), in parts that sum
// to step_ns: data_ns + compute_ns + wait_ns + transfer_ns.
struct RankSummary {
  int64_t rank = -1;
  std::string host;
  std::string ending;  // how the rank's run ended (run_enums.h), "" when it left no profile
  int exit_code = 0;
  size_t steps = 0;         // steady steps in the comparison
  double step_ns = 0;       // mean step
  double data_ns = 0;       // waiting for its DataLoader
  double compute_ns = 0;    // the rest of its own time: forward, backward, optimizer, Python
  double wait_ns = 0;       // in collectives, waiting for the last rank to arrive, not overlapped
  double transfer_ns = 0;   // in collectives after every rank arrived, not overlapped
  double runqueue_share = -1;  // of the run, its main thread waited for a CPU (schedstat); -1 unknown
  // Per compared step, its main thread's CPU time and its wait for a CPU
  // (Run::step_clocks), -1 unknown: what of its own time was computing.
  double cpu_ns = -1;
  double runqueue_ns = -1;
  // It ran device work (a GPU window, device collectives): its main
  // thread's CPU time is not all of its compute.
  bool device_work = false;
  // The same signs over the steps the waits are measured in (every rank
  // detailed them; all the compared steps under full detail): the
  // straggler's cause is read where its excess is (detectors/straggler.cc).
  double waited_data_ns = 0;
  double waited_cpu_ns = -1;
  double waited_runqueue_ns = -1;
  double last_share = 0;       // of the matched collectives, the share it arrived last at
  double end_unix_s = 0;       // when its run ended (wall clock)
  uint64_t collectives = 0;    // collectives it started (all, not only in the steps)
  int64_t collective_bytes = 0;
  double own_ns() const { return data_ns + compute_ns; }
};

// One collective name, over the matched operations of every rank.
struct CollectiveStats {
  std::string name;             // the op, "c10d::allreduce_" (a trace of Works alone: "gloo:all_reduce")
  std::string kind;             // what it does, "all_reduce" (model/collectives.h)
  uint64_t calls = 0;           // per rank (the lowest rank's count)
  int64_t bytes_per_call = -1;  // mean, -1 unknown
  double duration_ns = 0;       // mean enqueue-to-completion, over ranks
  double wait_ns = 0;           // mean time from a rank's arrival to the last rank's
  double transfer_ns = 0;       // mean time from the last arrival to completion
};

struct RankAnalysis {
  std::vector<RankSummary> ranks;  // by rank; empty when fewer than two ranks have steps
  std::vector<CollectiveStats> collectives;  // by total duration
  uint64_t matched = 0;    // operations matched on every rank
  size_t steps = 0;        // steady steps compared (the same index on every rank)
  size_t waited_steps = 0; // of them, those the waits are measured in
  // The ranks' wait for the last arrival in the median step where the
  // waits are measured (mean over the ranks in each step): what a typical
  // step waits, where RankSummary::wait_ns is the mean, which one step a
  // rank spent descheduled can carry over the few steps of a short run.
  double typical_wait_ns = 0;
  // How the ranks' clocks were put on one axis: "one host: one monotonic
  // clock", or "aligned on the collectives' completions (N hosts)".
  std::string clock;
  std::vector<int64_t> clock_offset_ns;  // per rank (ranks' order), added to its times
  std::vector<std::string> notes;        // what could not be compared, and why
  // The rank that failed first (an exception, a signal, a non-zero exit),
  // said in one line; -1 and "" when every rank finished.
  int64_t first_failure = -1;
  std::string failure;
  bool empty() const { return ranks.size() < 2; }
};

// RUNS and their STEPS (each rank's analyze_steps), by rank.
RankAnalysis analyze_ranks(const std::vector<const Run*>& runs, const std::vector<const StepAnalysis*>& steps);

}  // namespace torchneck
