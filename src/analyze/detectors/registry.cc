// Every detector, registered once: one line each, with the evidence it reads.
// Adding a finding: its line in findings.def, its file in this folder (which
// CMakeLists.txt picks up by itself), and its line here.
#include "analyze/diagnosis.h"

// X(evidence, function): the order is the order findings are produced in,
// which breaks ties of estimated gain and severity (finish_diagnosis).
#define TORCHNECK_DETECTORS(X)           \
  X(kCpu, detect_input_bound)            \
  X(kCpu, detect_slow_data_transform)    \
  X(kCpu, detect_heavy_layer)            \
  X(kCpu, detect_framework_overhead)     \
  X(kCpu, detect_cpu_threads_underused)  \
  X(kCpu, detect_optimizer_heavy)        \
  X(kCpu, detect_dataloader_respawn)     \
  X(kCpu, detect_periodic_stall)         \
  X(kCpu, detect_evaluation_heavy)       \
  X(kCpu, detect_step_time_drift)        \
  X(kCpu, detect_core_contention)        \
  X(kCpu, detect_busy_machine)           \
  X(kCpu, detect_memory_creep)           \
  X(kCpu, detect_gc_pauses)              \
  X(kRanks, detect_straggler)            \
  X(kRanks, detect_load_imbalance)       \
  X(kRanks, detect_communication_bound_ranks) \
  X(kGpu, detect_input_bound_gpu)        \
  X(kGpu, detect_communication_bound)    \
  X(kGpu, detect_gpu_idle)               \
  X(kGpu, detect_host_sync)              \
  X(kGpu, detect_launch_bound)           \
  X(kGpu, detect_no_mixed_precision)     \
  X(kGpu, detect_memory_pressure)        \
  X(kGpu, detect_pageable_memcpy)

namespace torchneck {

#define TORCHNECK_DECLARE(evidence, fn) void fn(const DiagnosisInput& in, std::vector<Finding>& out);
TORCHNECK_DETECTORS(TORCHNECK_DECLARE)
#undef TORCHNECK_DECLARE

const std::vector<RegisteredDetector>& detectors() {
#define TORCHNECK_ENTRY(evidence, fn) {#fn, Evidence::evidence, fn},
  static const std::vector<RegisteredDetector> all = {TORCHNECK_DETECTORS(TORCHNECK_ENTRY)};
#undef TORCHNECK_ENTRY
  return all;
}

}  // namespace torchneck
