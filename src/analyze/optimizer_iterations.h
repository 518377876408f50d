// A loop's iterations where its steps end at optimizer.step: what the loop
// repeats, read from the main thread's optimizer steps, backward passes,
// DataLoader fetches and top-level module calls (steps.cc's "optimizer"
// source; docs/diagnosis.md).
#pragma once

#include <cstdint>
#include <vector>

#include "analyze/loop_spans.h"

namespace torchneck {

// Longer repeating patterns of optimizer steps are not told apart.
constexpr size_t kMaxStepsPerIteration = 8;
// A pattern of k steps is the loop's when the module calls before a step
// are those before the k-th step after it in this share of the pairs seen
// (a layer-wise trainer changes layer once: one pair in its run differs).
constexpr double kPeriodAgreement = 0.8;

struct OptimizerLoop {
  std::vector<Span> steps;     // Optimizer.step spans, sorted
  std::vector<Span> passes;    // backward passes (loop_spans.h), sorted
  std::vector<Span> fetches;   // training DataLoader fetches, sorted
  std::vector<Span> forward;   // top-level module calls (loop_spans.h's module_spans)
  std::vector<uint32_t> roots; // each forward span's module
  int64_t begin = 0;           // where the first iteration begins
  size_t optimizers = 1;       // optimizers created
};

// The iterations, each ending at an optimizer step's end, the first from
// `begin`. In a loop that reads a batch each iteration (loop_spans.h's
// fetches_each_iteration), the steps with no training fetch between them
// are one iteration (a GAN's critic and generator updates on one batch).
// In one that does not, a step with no backward pass of its own joins the
// steps before it (an encoder's and a decoder's optimizers after one
// backward); the updates that remain are grouped by the loop's repeating
// pattern of module calls (a GAN's two updates, each with its own
// backward; one optimizer per layer, trained in turn: each update), or,
// with no module call seen, by the optimizers created where they divide
// the updates evenly.
std::vector<Span> optimizer_iterations(const OptimizerLoop& loop);

}  // namespace torchneck
