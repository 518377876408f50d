// What detail windows cost the steps inside them, as the run's own steps
// show it (docs/overhead.md). The collector's DetailPolicy measures the
// detail to size its windows but keeps no record; the analysis measures it
// again, window by window: the window's steps against the undetailed steps
// around it.
#pragma once

#include <cstddef>
#include <vector>

#include "analyze/step_types.h"

namespace torchneck {

// A window's steady steps whose median is this much slower than their
// undetailed neighbours' carry the detail's cost as much as the script's
// time. 5 %: what a median of a handful of steps moves on a noisy machine,
// and far below what the step-time statistics look for (a drift of 20 %,
// a slow step of twice its neighbours). Below it the window's steps stay
// in the statistics: the policy keeps a cheap detail on for most steps,
// and they are most of the run.
constexpr double kCostlyDetailShare = 0.05;
// The undetailed neighbours a window is measured against, at least: the
// policy's light probe after a window is 3 steps.
constexpr size_t kDetailNeighbours = 3;

// Each window (a maximal run of detailed steps) against a cluster of
// undetailed steady steps on either side: as many as the window has steady
// steps (at least kDetailNeighbours), from the stretch next to it. The
// undetailed time at each of its steps is the line through the two
// clusters' medians; where one side has none, the line through the next
// two stretches on the other side, or with a single cluster its median, and
// then only the window's steps nearest to it count (as many as the nearer
// cluster has). Its cost is the median of its steps' time over that line,
// less one. Steps of a window costlier than kCostlyDetailShare are
// no longer steady (Step::detail_excluded), and carry the cost
// (Step::detail_cost); a window without undetailed steady neighbours stays
// as it is. Returns the steps excluded.
size_t exclude_costly_detail(std::vector<Step>& steps);

}  // namespace torchneck
