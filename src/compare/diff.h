// `torchneck diff BEFORE AFTER`: what changed between two runs
// (docs/diff.md). The step time's change with an interval drawn from both
// runs' own step-to-step noise, what moved (phases, layers, operators,
// Python functions), the findings resolved, new and kept, and for each
// resolved one its estimated gain against the change measured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/bootstrap.h"
#include "compare/profile_view.h"

namespace torchneck::compare {

// A row present in either run: its time per step in each (0 when absent:
// not run, or below the profile's top rows), after - before.
struct Mover {
  std::string name;
  double before_ms = 0, after_ms = 0, delta_ms = 0;
  bool in_before = false, in_after = false;
};

enum class FindingState { kResolved, kNew, kKept };

struct FindingChange {
  std::string id;
  FindingState state = FindingState::kKept;
  std::string severity_before, severity_after;  // "" when absent (or low: not serious)
  std::string title;                            // the run's where it is serious (before's when both)
  // Resolved: the step time change the finding promised (-its estimated
  // gain), beside the change measured (RunDiff::change_pct).
  std::optional<double> estimated_change_pct;
  // Resolved, when BEFORE's run --try measured the finding's setting: the
  // change it measured (-its measured gain).
  std::optional<double> try_change_pct;
};

// Changes smaller than this are by default never called significant
// (--noise-floor): the interval covers each run's step-to-step noise, not
// the machine's speed drifting between two runs, which on a shared machine
// is a few percent (docs/diff.md has the measurement): 5 % keeps most of it
// out of the verdict without hiding the changes a fix makes.
inline constexpr double kDefaultNoiseFloorPct = 5.0;
// Fewer steady steps than this in either run: the interval is too rough to
// call anything.
inline constexpr size_t kMinSteps = 5;

struct DiffOptions {
  size_t top = 10;           // rows per table of movers
  int resamples = 2000;      // bootstrap resamples
  uint64_t seed = 20261201;  // a fixed seed: the same two runs give the same interval
  double noise_floor_pct = kDefaultNoiseFloorPct;
};

struct RunDiff {
  ProfileView before, after;
  bool same_script = true;
  size_t before_steps = 0, after_steps = 0;  // steady steps sampled
  double before_ms = 0, after_ms = 0;        // their mean
  double change_pct = 0;                     // after / before - 1, in %: negative when faster
  // Of change_pct; none when a run has fewer than kMinSteps steady steps
  // (then nothing is significant and the gate cannot decide).
  std::optional<Interval> ci95_pct;
  int block_length = 1;                      // the bootstrap's blocks, in steps
  bool significant = false;                  // the interval excludes 0 and the change passes the floor
  double noise_floor_pct = kDefaultNoiseFloorPct;
  std::string method;                        // how the interval was drawn (or why there is none), one line
  std::vector<Mover> phases;                 // every phase, largest |delta| first
  std::vector<Mover> layers, ops, python;    // the top movers
  std::vector<FindingChange> findings;       // resolved, new, kept
  std::vector<std::string> notes;            // different scripts, too few steps, another torch
};

RunDiff diff_profiles(ProfileView before, ProfileView after, const DiffOptions& options = {});

// `--fail-if-slower PCT`'s answer. kSlower: the run got slower by more than
// PCT and the slowdown is significant (outside the noise); kUndecided: there
// is no interval (too few steady steps), so no change can be told from noise.
enum class Gate { kPass, kSlower, kUndecided };
Gate slower_gate(const RunDiff& d, double pct);

// Why `d` has no interval, in words: "too few steady steps: 3 before, 2
// after (an interval needs 5 in each)".
std::string no_interval_reason(const RunDiff& d);

const char* state_name(FindingState s);

}  // namespace torchneck::compare
