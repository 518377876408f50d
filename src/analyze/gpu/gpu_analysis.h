// GPU-side facts of a Kineto trace that torchneck reports itself (the
// TensorBoard plugin's and HTA's own analyses are in tbplugin.h and hta.h):
// top kernels, kernel launches, CPU<->GPU synchronisation points with the
// operator that caused them, pageable host memory copies, GPU time per
// top-level operator.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/run.h"

namespace torchneck::gpu {

struct KernelStats {
  std::string name;
  uint64_t calls = 0;
  int64_t total_ns = 0;
  double share = 0;  // of all kernel time
  std::array<int32_t, 3> grid{}, block{};  // of its longest call
  bool tensor_cores = false;  // by name, the TensorBoard plugin's list
};

struct SyncPoint {
  std::string what;     // "cudaStreamSynchronize", "Memcpy DtoH (Device -> Pageable)"
  std::string context;  // the operator that issued it: "outermost op > innermost op"
  uint64_t calls = 0;
  int64_t total_ns = 0;  // time the CPU was blocked (the runtime call) or the copy took
};

struct OpGpuTime {
  std::string op;  // top-level CPU operator (below ProfilerStep)
  int64_t gpu_ns = 0;
  uint64_t kernels = 0;
};

// GPU time of an nn.Module (the trace's "nn.Module: NAME" python_function
// scopes, written with with_modules=True / with_stack=True): forward, the
// device work launched inside the module; backward, the device work of the
// autograd nodes whose forward op ran inside it (fwdbwd flows).
struct LayerGpuTime {
  std::string module;  // "nn.Module: Conv2d_0" without the prefix
  int64_t forward_ns = 0;
  int64_t backward_ns = 0;
  uint64_t kernels = 0;
};

struct GpuFacts {
  std::string device_name;  // first device of deviceProperties, "" if none
  int64_t device_memory = 0;
  int64_t compute_major = 0;
  int64_t span_ns = 0;  // first to last event of the trace
  uint64_t kernels = 0;
  int64_t kernel_ns = 0, memcpy_ns = 0, memset_ns = 0;
  std::vector<KernelStats> top_kernels;  // by total time
  bool any_tensor_cores = false;
  int64_t tensor_core_ns = 0;
  // Launches: runtime calls matched to their device work by correlation.
  uint64_t launches = 0;
  int64_t launch_api_ns = 0;          // CPU time in cudaLaunchKernel & co
  uint64_t short_kernels = 0;         // under kShortKernelNs
  int64_t median_launch_delay_ns = 0; // kernel start - launch call start
  int64_t p99_launch_delay_ns = 0;
  uint64_t launch_delay_outliers = 0; // over kLaunchDelayOutlierNs
  // Synchronisation.
  std::vector<SyncPoint> syncs;  // by total time
  int64_t sync_ns = 0;
  // Pageable host memory copies (HtoD/DtoH from/to pageable memory).
  uint64_t pageable_copies = 0;
  int64_t pageable_bytes = 0;
  int64_t pageable_ns = 0;
  std::vector<OpGpuTime> gpu_time_by_op;  // by GPU time
  std::vector<LayerGpuTime> gpu_time_by_layer;  // by forward + backward; empty without module scopes
  // Device memory (first device with "[memory]" events), -1 unknown.
  int64_t peak_allocated = -1;
  int64_t peak_reserved = -1;
  bool peak_is_lower_bound = false;  // from Bytes deltas only: memory before the trace unknown
};

inline constexpr int64_t kShortKernelNs = 10'000;
inline constexpr int64_t kLaunchDelayOutlierNs = 1'000'000;

GpuFacts gpu_facts(const Run& run, size_t top = 15);

// Runtime calls that block the CPU until the device catches up.
bool synchronising_call(std::string_view name);

bool is_tensor_core_kernel(const std::string& name);

}  // namespace torchneck::gpu
