#include "analyze/detail_cost.h"

#include <algorithm>
#include <cstdint>

#include "core/stats.h"

namespace torchneck {
namespace {

// Up to `want` steady steps of one stretch of undetailed steps, the ones
// nearest to a window: where they lie (their mean index) and their median.
struct Cluster {
  double at = 0, ns = 0;
  size_t n = 0;
};

Cluster cluster(const std::vector<Step>& steps, size_t from, int step, size_t want) {
  Cluster c;
  std::vector<double> d;
  double at = 0;
  for (auto i = static_cast<std::ptrdiff_t>(from);
       i >= 0 && i < static_cast<std::ptrdiff_t>(steps.size()) && !steps[static_cast<size_t>(i)].detailed &&
       d.size() < want;
       i += step)
    if (steps[static_cast<size_t>(i)].steady) {
      d.push_back(static_cast<double>(steps[static_cast<size_t>(i)].duration()));
      at += static_cast<double>(i);
    }
  if (d.empty()) return c;
  c.n = d.size();
  c.at = at / static_cast<double>(c.n);
  c.ns = median(d);
  return c;
}

// The first index of the window that ends at i (searching down), or past
// the window that starts at i (searching up).
size_t skip_window_down(const std::vector<Step>& steps, size_t i) {
  while (i > 0 && steps[i - 1].detailed) --i;
  return i;
}
size_t skip_window_up(const std::vector<Step>& steps, size_t i) {
  while (i < steps.size() && steps[i].detailed) ++i;
  return i;
}

}  // namespace

size_t exclude_costly_detail(std::vector<Step>& steps) {
  size_t excluded = 0;
  for (size_t begin = 0; begin < steps.size();) {
    if (!steps[begin].detailed) {
      ++begin;
      continue;
    }
    const size_t end = skip_window_up(steps, begin);
    std::vector<size_t> inside;
    for (size_t i = begin; i < end; ++i)
      if (steps[i].steady) inside.push_back(i);
    const size_t want = std::max(kDetailNeighbours, inside.size());
    // The undetailed steps next to the window on either side; where one
    // side has none, the next stretch on the other side instead.
    Cluster left = begin > 0 ? cluster(steps, begin - 1, -1, want) : Cluster{};
    Cluster right = cluster(steps, end, +1, want);
    if (left.n == 0 && right.n > 0) {
      // the stretch after the window that follows `right`'s stretch
      size_t i = end;
      while (i < steps.size() && !steps[i].detailed) ++i;
      left = right;
      right = cluster(steps, skip_window_up(steps, i), +1, want);
    } else if (right.n == 0 && left.n > 0) {
      size_t i = begin;
      while (i > 0 && !steps[i - 1].detailed) --i;
      right = left;
      const size_t j = skip_window_down(steps, i);
      left = j > 0 ? cluster(steps, j - 1, -1, want) : Cluster{};
    }
    if (!inside.empty() && (left.n > 0 || right.n > 0)) {
      // The undetailed step time at each of the window's steps: the line
      // through the two clusters (a trend over the run, growing state,
      // moves the window's steps as much, and cancels), or the one
      // cluster's median. Beyond the clusters (both on one side, or one),
      // only the window's steps nearest to them, as many as the nearer
      // cluster has: a line drawn far from its points is a guess.
      const bool line = left.n > 0 && right.n > 0 && right.at != left.at;
      const bool between = line && left.at < static_cast<double>(begin) && right.at > static_cast<double>(end);
      const auto distance = [&](const Cluster& c) {
        return c.at < static_cast<double>(begin) ? static_cast<double>(begin) - c.at : c.at - static_cast<double>(end - 1);
      };
      const Cluster& nearer = left.n == 0 ? right : right.n == 0 ? left : distance(left) <= distance(right) ? left : right;
      std::vector<size_t> measured = inside;
      if (!between) {
        const size_t n = std::min(nearer.n, measured.size());
        if (nearer.at < static_cast<double>(begin)) measured.resize(n);
        else measured.erase(measured.begin(), measured.end() - static_cast<std::ptrdiff_t>(n));
      }
      std::vector<double> ratio;
      for (size_t i : measured) {
        const double base = line ? left.ns + (right.ns - left.ns) * (static_cast<double>(i) - left.at) / (right.at - left.at)
                                 : nearer.ns;
        if (base > 0) ratio.push_back(static_cast<double>(steps[i].duration()) / base);
      }
      const double cost = ratio.empty() ? 0.0 : median(ratio) - 1.0;
      if (cost > kCostlyDetailShare)
        for (size_t i : inside) {
          steps[i].steady = false, steps[i].detail_excluded = true, steps[i].detail_cost = cost;
          ++excluded;
        }
    }
    begin = end;
  }
  return excluded;
}

}  // namespace torchneck
