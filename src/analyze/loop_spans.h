// The spans a training loop is made of, on the main thread's timeline:
// top-level nn.Module calls, backward passes, and which module calls were
// training and which were evaluation (no backward ever ran through them).
// Steps (steps.cc) and layers (layers.cc) both read them.
#pragma once

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "analyze/timeline_view.h"
#include "model/run.h"

namespace torchneck {

using Span = std::pair<int64_t, int64_t>;  // [start_ns, end_ns)

// The DataLoader fetches (__next__) on the main thread, sorted by start.
std::vector<Span> fetch_spans(const Run& run);

// Top-level nn.Module forward spans on the main thread, in time order,
// except those inside a DataLoader fetch: a module the loader calls
// (torchvision's transforms are modules) is data work, not the model's.
// `roots`, where given, gets each span's module (an index in Run::modules).
std::vector<Span> module_spans(const TimelineView& tv, std::vector<uint32_t>* roots = nullptr);

// Whether Run::modules[m] is a frozen network: it has parameters and none
// of them requires grad (a loss network, a frozen encoder).
bool is_frozen(const Run& run, uint32_t m);

// Maximal runs of backward work on the main thread: a pass ends when an
// event that is not backward work starts after everything of the pass ended.
std::vector<Span> backward_passes(const TimelineView& tv);

// Evaluation passes: maximal runs of top-level module calls that no backward
// pass ever went through (model.eval() / torch.no_grad() / inference_mode
// passes inside a training loop, validation loops), with the DataLoader
// fetches that serve them (the one just before the first call, and those
// after the last one except the fetch that starts training again). A module
// call is training when one of its operators created an autograd node that
// ran in a backward pass: the operator whose (forward thread, sequence
// number) a backward node carries, the latest-starting one as in layers.cc.
// A run with no backward at all (inference only) has no evaluation passes:
// its forward is the work. Evaluation evaluates the model being trained
// every few iterations: a root module's calls (`roots`: each forward span's
// module) that come in most iterations if the loop does not train it
// (frozen, or never in a training call: a loss network, a teacher), nearly
// every one if it does (a GAN's generator making detached samples), are the
// step's forward work, not evaluation; `frozen`, where given, gets them
// (indices into `forward`), and `trained` the root modules with a training call.
std::vector<Span> evaluation_passes(const TimelineView& tv, const std::vector<Span>& backward,
                                    const std::vector<Span>& forward, const std::vector<uint32_t>& roots,
                                    std::vector<size_t>* frozen = nullptr, std::set<uint32_t>* trained = nullptr);

// Whether the loop reads a batch from a DataLoader in its iterations: at
// least one of the sorted `fetches` for every kMaxUpdatesPerFetch of the
// sorted `updates` (optimizer steps, backward passes), among them. A loader
// read once for the whole dataset (a forward-forward trainer's) is not.
constexpr size_t kMaxUpdatesPerFetch = 8;
bool fetches_each_iteration(const std::vector<Span>& fetches, const std::vector<Span>& updates);

// Whether one of the sorted `spans` starts in [from, to).
bool starts_between(const std::vector<Span>& spans, int64_t from, int64_t to);

// The sorted `spans`, each run of them between which none of the sorted
// `separators` starts merged into one span.
std::vector<Span> merge_unseparated(const std::vector<Span>& spans, const std::vector<Span>& separators);

// Whether [start, end) lies inside one of the sorted, disjoint `spans`.
bool inside_any(const std::vector<Span>& spans, int64_t start, int64_t end);

}  // namespace torchneck
