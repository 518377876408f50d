// The flame graph of a run: one tree of call paths weighted by time, for
// report.html's icicle, stacks.folded and speedscope. Plain std types; no
// Python, no ATen.
//
// How the tree is built (see docs/flame-graphs.md):
//
// - Sampled threads (a thread with any stack in Run::stacks): each sample in
//   the sampler's timeline window (Run::samples) is the path of its Python
//   frames, outermost first, followed by the nn.Module calls (Run::
//   module_events), torch operators, backward nodes and user scopes that were
//   open on that thread at the sample's time (Run::timeline), outermost
//   first, weighted by the sample's weight. (Modules thus read as "what"
//   below the Python stack's "where": the Python frames of nested forward()
//   calls stay above them.) The
//   samples of a stack outside the window (or the timeline not kept) add the
//   rest of that stack's weight as the Python frames alone. So the time under
//   a sampled thread is exactly the sampled time of its stacks, and an op
//   below a Python frame is time the sampler saw that frame's thread in it.
//   With detail windows (Run::detail_mode "window"), a sample outside them
//   met no recorded operator: a stack's samples outside the windows are
//   split over the paths its samples inside them reached, in their
//   proportions of time (a stack never sampled inside one keeps its Python
//   frames alone).
//
// - Threads without samples but with timeline events (the autograd engine's
//   device threads, which run backward nodes without a Python stack; a run
//   with --python off or trace; `torchneck analyze` of a Kineto trace, whose
//   Run has operators but no stacks): their events' nesting, time-weighted.
//   Each stretch of time goes to the path of the events open then (traced
//   Python calls of Run::py_frames, module calls and timeline events,
//   outermost first), so
//   a node's self time is its event's self time and the thread's total is the
//   time covered by its top-level events (their union). Time when nothing was
//   open on such a thread is not in the tree: it shows what the thread did,
//   not its idle time.
//
// torchneck's launcher frames (runpy, torchneck's cli and runner) above the
// user's script are left out of Python paths.
//
// So the root's total is the sampled time of all sampled threads plus the
// event time of the unsampled ones. With more than one thread, each thread is
// a kThread node below the root.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/run.h"

namespace torchneck {

enum class FlameKind : uint8_t {
  kRoot,      // the whole run
  kThread,    // one thread (when more than one thread contributes)
  kPython,    // a Python function
  kOperator,  // a torch operator (aten::mm), or a TorchScript function
  kBackward,  // an autograd node run by the engine
  kScope,     // record_function, DataLoader __next__, Optimizer.step
  kModule,    // an nn.Module call: "layer1.0.conv1 (Conv2d)", or the root's class
};
const char* flame_kind_name(FlameKind kind);

struct FlameNode {
  std::string name;  // "forward", "aten::mm"
  std::string file;  // Python frames: the file; empty otherwise
  int line = 0;
  FlameKind kind = FlameKind::kRoot;
  int64_t total_ns = 0;  // this node and everything below it
  int64_t self_ns = 0;   // this node alone
  uint64_t samples = 0;  // samples at or below it (0 for event-time paths)
  std::vector<FlameNode> children;  // heaviest first
};

// The run's flame tree (see the top of this file).
FlameNode build_flame(const Run& run);

}  // namespace torchneck
