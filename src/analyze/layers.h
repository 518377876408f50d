// Per-layer forward and backward time. Forward: the module's own call spans
// (inclusive of its children). Backward: each autograd node's time goes to
// the module that was innermost-open when the forward op that created the
// node started, found through (forward thread id, sequence number) → the
// latest-starting forward op with that key (docs/architecture.md, "Facts"); blocks include
// their children's backward time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/run.h"

namespace torchneck {

// A training call that took over this many times its module's median call
// (forward plus the backward of what it created) held a wait: for a CPU
// (ours, or the hypervisor's that schedstat does not see), a page, a lock.
// Inputs of varying size rarely spread a layer's calls that far.
inline constexpr double kStalledCallFactor = 4.0;
// Fewer training calls give no median to judge one call by.
inline constexpr size_t kMinCallsForStalls = 5;

struct LayerStats {
  uint32_t module = 0;  // index into Run::modules
  std::string name;
  std::string type;
  std::string config;       // ModuleInfo::config: "in_features=4096, out_features=512, bias=True"
  uint64_t calls = 0;       // training calls (outside evaluation passes)
  int64_t forward_ns = 0;   // inclusive, training calls only
  // Calls inside evaluation passes (StepAnalysis::evaluation): not the
  // training step's cost, shown apart.
  uint64_t eval_calls = 0;
  int64_t eval_forward_ns = 0;
  int64_t backward_ns = 0;  // inclusive
  int64_t params = 0;
  int depth = 0;            // 0 for a root model
  bool leaf = true;         // no child module was called, and not compiled
  bool compiled = false;    // torch.compile'd: its time is its compiled region's (compiled.h)
  // The last leaf with parameters its root model calls first (its modules
  // are indexed in first-call order): the model's output layer, whose
  // width the task sets (a classifier's classes, a vocabulary).
  bool output_layer = false;
  // GPU work launched in the run's GPU window (GpuLaunch below): in the
  // module's forward, and by the backward nodes it created; inclusive of
  // children, training calls only. -1: no GPU window.
  int64_t gpu_forward_ns = -1;
  int64_t gpu_backward_ns = -1;
  uint64_t gpu_launches = 0;  // own and children's, forward and backward
  // Of combined(), what its training calls took beyond kStalledCallFactor
  // times its median call: waits that landed on it, not its work.
  int64_t stalled_ns = 0;
  int64_t combined() const { return forward_ns + backward_ns; }
  // combined() without those waits: what its work costs.
  int64_t worked() const { return combined() - stalled_ns; }
};

// One launch of device work in a live run's GPU window: the thread and time
// of the runtime call (on the live run's clock) and the device time of the
// work it launched (analyze/gpu/gpu_window.h makes them from the trace).
struct GpuLaunch {
  uint32_t thread_index = 0;  // into Run::threads
  int64_t t_ns = 0;
  int64_t device_ns = 0;
};

struct LayerAnalysis {
  std::vector<LayerStats> layers;  // sorted by forward + backward, descending
  int64_t backward_attributed_ns = 0;  // backward node time that found a module
  int64_t backward_unattributed_ns = 0;  // also: backward nodes run while torch.compile compiled
  // With GPU launches: their device time that found a layer (forward or
  // backward), and the rest (the optimizer, the loss, evaluation passes,
  // work launched outside any module).
  bool gpu = false;
  int64_t gpu_attributed_ns = 0;
  int64_t gpu_unattributed_ns = 0;
};

// `evaluation`: the evaluation passes (StepAnalysis::evaluation, sorted):
// module calls inside them count as eval_calls. Module calls inside a
// DataLoader fetch on the main thread (transforms) are data work: not counted.
// `launches` (sorted or not; null: no GPU window): each one's device time
// goes to the layer whose forward was innermost-open on its thread at its
// time, or, when it ran inside a backward node, to the module that created
// the node (as backward_ns does); inside an evaluation pass, to none.
LayerAnalysis analyze_layers(const Run& run, const std::vector<std::pair<int64_t, int64_t>>& evaluation = {},
                             const std::vector<GpuLaunch>* launches = nullptr);

}  // namespace torchneck
