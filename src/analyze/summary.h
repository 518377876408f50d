// The first analysis: rank what the collectors measured. Reports read this,
// never re-sort the model themselves, so terminal text and profile.json agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/run.h"

namespace torchneck {

// Rows in each table of the reports unless the user says (--top).
inline constexpr size_t kDefaultTop = 15;

struct SummaryOptions {
  size_t top_python = kDefaultTop;
  size_t top_ops = kDefaultTop;
  size_t top_backward = kDefaultTop;
  size_t top_scopes = kDefaultTop;
};

struct Summary {
  // Indices into Run::python / Run::ops, most expensive (self time) first.
  std::vector<size_t> top_python;
  std::vector<size_t> top_ops;       // OpKind::kOperator
  std::vector<size_t> top_backward;  // OpKind::kBackward
  std::vector<size_t> top_scopes;    // OpKind::kUserScope
  int64_t op_self_ns = 0;         // sum of operator self time: the 100 % of "share"
  int64_t backward_self_ns = 0;
  int64_t python_self_ns = 0;     // sum of Python self time (all threads)
  uint64_t op_calls = 0;
};

Summary summarize(const Run& run, const SummaryOptions& options);

// Share of `part` in `whole`, 0 when whole is 0.
double share(int64_t part, int64_t whole);

}  // namespace torchneck
