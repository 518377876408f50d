// The operators the training loop issues itself (TopLevelOps, steps.h):
// counted into their steps by analyze_steps, summarised here over the
// detailed steps the statistics read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "analyze/steps.h"
#include "model/run.h"

namespace torchneck {

// The most called top-level operators named in TopLevelOps::most_called.
constexpr size_t kMostCalledTopLevelOps = 3;
// A small call: under 20 us with what it calls, it carries little
// arithmetic beside a dispatch that costs a few us on its own.
constexpr int64_t kSmallCallNs = 20'000;

// One top-level operator of a step: an index into the steps, its time
// (nested operators included) and its name (an index into Run::strings).
struct TopLevelOp {
  size_t step = 0;
  int64_t ns = 0;
  uint32_t name_id = 0;
};

// OPS in start order; STEPS with their steady, detail_excluded and
// breakdown set.
TopLevelOps summarize_top_level_ops(const Run& run, const std::vector<Step>& steps, const std::vector<TopLevelOp>& ops);

}  // namespace torchneck
