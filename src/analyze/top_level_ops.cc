#include "analyze/top_level_ops.h"

#include <algorithm>
#include <map>
#include <string>

namespace torchneck {
namespace {

// The steps the figures are over: detailed (their operators recorded) and
// steady, or left out only for their window's cost (StepAnalysis's statistics).
bool counted(const Step& s) { return s.detailed && (s.steady || s.detail_excluded); }

// A backward node's evaluation by the autograd engine is one call of the
// backward pass: named by its node ("AddBackward0 (backward)").
std::string call_name(const std::string& op) {
  static const std::string kEngine = "autograd::engine::evaluate_function: ";
  if (op.rfind(kEngine, 0) == 0) return op.substr(kEngine.size()) + " (backward)";
  return op;
}

}  // namespace

TopLevelOps summarize_top_level_ops(const Run& run, const std::vector<Step>& steps, const std::vector<TopLevelOp>& ops) {
  TopLevelOps t;
  std::map<uint32_t, uint64_t> calls;
  for (const TopLevelOp& op : ops) {
    if (!counted(steps[op.step])) continue;
    ++calls[op.name_id];
    t.per_step += 1;
    t.ns_per_step += static_cast<double>(op.ns);
    if (op.ns <= kSmallCallNs) {
      t.small_per_step += 1;
      t.small_ns_per_step += static_cast<double>(op.ns);
    }
  }
  size_t detailed = 0;
  for (const Step& s : steps)
    if (counted(s)) {
      ++detailed;
      t.compute_ns_per_step += static_cast<double>(s.breakdown.compute());
    }
  if (detailed == 0 || calls.empty()) return TopLevelOps{};
  const auto n = static_cast<double>(detailed);
  t.per_step /= n;
  t.ns_per_step /= n;
  t.small_per_step /= n;
  t.small_ns_per_step /= n;
  t.compute_ns_per_step /= n;
  std::vector<std::pair<uint64_t, uint32_t>> by_calls;
  for (const auto& [name, c] : calls) by_calls.emplace_back(c, name);
  const size_t shown = std::min(kMostCalledTopLevelOps, by_calls.size());
  std::partial_sort(by_calls.begin(), by_calls.begin() + static_cast<std::ptrdiff_t>(shown), by_calls.end(),
                    [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (size_t i = 0; i < shown; ++i) {
    const uint32_t id = by_calls[i].second;
    t.most_called.emplace_back(call_name(id < run.strings.size() ? run.strings[id] : "?"),
                               static_cast<double>(by_calls[i].first) / n);
  }
  return t;
}

}  // namespace torchneck
