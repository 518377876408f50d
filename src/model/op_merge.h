// Merging per-thread operator aggregates into the run's OpStats: one entry
// per (name, kind), calls and times summed, threads listed, shape signatures
// counted and bounded. Plain std code, so it is unit-tested without torch;
// the RecordFunction observer feeds it at collect time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/run.h"

namespace torchneck {

// Signatures beyond the kept ones are counted under this name; it is ranked
// like any other signature.
inline constexpr const char* kOtherShapes = "(other)";

class OpMerger {
 public:
  // Adds one thread's totals for an operator.
  void add(std::string_view name, OpKind kind, uint32_t thread_index, uint64_t calls,
           int64_t self_ns, int64_t total_ns);
  // Adds `count` sampled calls of `name`/`kind` with input signature `shapes`.
  void add_shapes(std::string_view name, OpKind kind, std::string_view shapes, uint64_t count);

  // Appends the merged operators to `out` (ops with no completed call are
  // left out), sorted by self time, then name, then kind. Shape lists are
  // most frequent first; past `max_shapes`, the tail folds into "(other)".
  void finish(std::vector<OpStats>& out, size_t max_shapes);

 private:
  struct Merged {
    OpStats stats;
    std::unordered_map<std::string, uint64_t> shapes;
  };
  Merged& entry(std::string_view name, OpKind kind);

  std::unordered_map<std::string, size_t> index_;  // kind digit + name
  std::vector<Merged> merged_;
};

}  // namespace torchneck
