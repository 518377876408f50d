#include "model/run_set.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace torchneck {

RunSet merge_ranks(std::vector<Run> runs) {
  if (runs.empty()) throw std::invalid_argument("no run to merge");
  RunSet set;
  set.runs = std::move(runs);
  std::stable_sort(set.runs.begin(), set.runs.end(),
                   [](const Run& x, const Run& y) { return x.rank.rank < y.rank.rank; });
  std::map<int64_t, int> seen;
  std::map<int64_t, int> world_sizes;
  for (const Run& r : set.runs) {
    if (r.rank.rank >= 0) ++seen[r.rank.rank];
    if (r.rank.world_size >= 0) ++world_sizes[r.rank.world_size];
  }
  for (const auto& [rank, n] : seen)
    if (n > 1)
      set.notes.push_back("rank " + std::to_string(rank) + " appears in " + std::to_string(n) +
                          " traces: they are reported apart, not merged");
  if (world_sizes.size() > 1) {
    std::string sizes;
    for (const auto& [size, n] : world_sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(size);
    set.notes.push_back("the traces name different world sizes (" + sizes + "): they may come from different jobs");
  }
  return set;
}

}  // namespace torchneck
