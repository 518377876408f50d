// The flame graph of a run: one tree of call paths weighted by time, for
// report.html's icicle, stacks.folded and speedscope. Built from the
// sampler's stacks (sample mode). Plain std types; no Python, no ATen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/run.h"

namespace torchneck {

enum class FlameKind : uint8_t {
  kRoot,      // the whole run
  kThread,    // one thread (when more than one thread was sampled)
  kPython,    // a Python function
  kOperator,  // a torch operator (aten::mm)
  kBackward,  // an autograd node run by the engine
  kScope,     // record_function, DataLoader __next__, Optimizer.step
};
const char* flame_kind_name(FlameKind kind);

struct FlameNode {
  std::string name;  // "forward", "aten::mm"
  std::string file;  // Python frames: the file; empty otherwise
  int line = 0;
  FlameKind kind = FlameKind::kRoot;
  int64_t total_ns = 0;  // this node and everything below it
  int64_t self_ns = 0;   // this node alone
  uint64_t samples = 0;  // samples at or below it
  std::vector<FlameNode> children;  // heaviest first
};

// The run's flame tree. The root's total is the sampled time of all threads.
FlameNode build_flame(const Run& run);

}  // namespace torchneck
