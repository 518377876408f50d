// The collectors of a live run, chosen once from the session's options, as
// Collector implementations (collect/collector.h) over the existing
// start/stop/snapshot/collect functions of each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collect/collector.h"
#include "model/run_enums.h"

namespace torchneck {

struct CollectorOptions {
  PythonMode python_mode = PythonMode::kSample;
  double sample_hz = 200.0;
  bool ops = true;
  bool modules = true;  // nn.Module scopes for layers and the forward phase
  size_t timeline_events_per_thread = size_t{1} << 19;
  double shape_sample_prob = 0.05;
  bool detail_windows = true;  // --detail=window (core/detail_window.h); false: --detail=full
  // A rank's windows: the fixed schedule's period (kLockstepPeriod), 0: sized by their cost.
  int64_t detail_lockstep_period = 0;
  int64_t memory_interval_ms = 100;  // resident memory sampling, 0: off
  // GPU sampling through NVML, 0: off (the one switch: --nvml-interval-ms=0,
  // DataLoader workers, and a run with the GPU side off all set it to 0).
  int64_t nvml_interval_ms = 100;
  bool gc = true;                    // garbage collections (gc.callbacks)
};

// In start order (collect/collector.h): the operator observer and its
// record_function scopes, the memory
// sampler, the NVML sampler, the module scopes, the GC pauses, then the Python sampler or
// tracer.
std::vector<std::unique_ptr<Collector>> make_collectors(const CollectorOptions& options);

}  // namespace torchneck
