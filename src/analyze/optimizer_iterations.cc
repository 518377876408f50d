#include "analyze/optimizer_iterations.h"

#include <algorithm>
#include <utility>

namespace torchneck {
namespace {

// The updates of a loop without a DataLoader: runs of optimizer steps (as
// [first, last] indices) each with backward passes of its own (before its
// first step's end; LBFGS's closures run inside it), a step without one
// joining the run before it where that run had one.
std::vector<std::pair<size_t, size_t>> updates(const OptimizerLoop& loop) {
  const std::vector<Span>& s = loop.steps;
  auto own_backward = [&](size_t i) {
    return starts_between(loop.passes, i == 0 ? loop.begin : s[i - 1].second, s[i].second);
  };
  std::vector<std::pair<size_t, size_t>> out;
  bool backward = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool own = own_backward(i);
    if (!out.empty() && backward && !own) {
      out.back().second = i;
      continue;
    }
    out.emplace_back(i, i);
    backward = own;
  }
  return out;
}

// Each update's top-level module calls, as their modules in call order
// (empty where none was recorded: outside detail windows).
std::vector<std::vector<uint32_t>> signatures(const OptimizerLoop& loop,
                                              const std::vector<std::pair<size_t, size_t>>& units) {
  std::vector<std::vector<uint32_t>> out(units.size());
  size_t u = 0;
  for (size_t i = 0; i < loop.forward.size() && i < loop.roots.size(); ++i) {
    const int64_t t = loop.forward[i].first;
    while (u < units.size() && loop.steps[units[u].second].second <= t) ++u;
    if (u == units.size()) break;
    out[u].push_back(loop.roots[i]);
  }
  return out;
}

// The updates an iteration holds: the smallest k whose pattern the module
// calls follow (kPeriodAgreement of the recorded pairs k apart alike);
// 0 when none is seen.
size_t updates_per_iteration(const std::vector<std::vector<uint32_t>>& sig) {
  for (size_t k = 1; k <= kMaxStepsPerIteration; ++k) {
    size_t pairs = 0, alike = 0;
    for (size_t i = 0; i + k < sig.size(); ++i) {
      if (sig[i].empty() || sig[i + k].empty()) continue;
      ++pairs;
      alike += sig[i] == sig[i + k] ? 1 : 0;
    }
    if (pairs > 0 && static_cast<double>(alike) >= kPeriodAgreement * static_cast<double>(pairs)) return k;
  }
  return 0;
}

}  // namespace

std::vector<Span> optimizer_iterations(const OptimizerLoop& loop) {
  const std::vector<Span>& s = loop.steps;
  std::vector<size_t> ends;  // the last optimizer step of each iteration
  if (fetches_each_iteration(loop.fetches, s)) {
    for (size_t i = 0; i < s.size(); ++i)
      if (i + 1 == s.size() || starts_between(loop.fetches, s[i].second, s[i + 1].first)) ends.push_back(i);
  } else {
    const auto units = updates(loop);
    size_t k = updates_per_iteration(signatures(loop, units));
    // No module call seen: where no step joined another, each optimizer
    // created steps once an iteration if the updates divide evenly.
    const size_t created = std::max<size_t>(1, loop.optimizers);
    if (k == 0) k = units.size() == s.size() && units.size() % created == 0 ? created : 1;
    for (size_t u = k - 1; u < units.size(); u += k) ends.push_back(units[u].second);
    if (!units.empty() && (ends.empty() || ends.back() != units.back().second)) ends.push_back(units.back().second);
  }
  std::vector<Span> out;
  int64_t b = loop.begin;
  for (size_t i : ends) {
    out.emplace_back(b, s[i].second);
    b = s[i].second;
  }
  return out;
}

}  // namespace torchneck
