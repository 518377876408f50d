// The GPUs over the whole run, from NVML: a native thread that reads each
// visible GPU's utilisation, memory in use, SM clock and power every
// interval into a fixed, preallocated series per GPU (thinned by halving
// when full, as the memory sampler's), into Run::nvml_devices and Run::nvml.
//
// NVML is loaded with dlopen at start, so nothing needs it to build and a
// machine without it runs as before: libnvidia-ml.so.1 (the driver's), or
// the file the environment variable TORCHNECK_NVML_LIBRARY names (an odd
// install; the tests' stand-in library). No NVML header is used: the few
// types and functions are declared in nvml_sampler.cc with nvml.h's ABI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/run.h"

namespace torchneck {

struct NvmlSamplerOptions {
  int64_t interval_ns = 100'000'000;  // --nvml-interval-ms
  size_t capacity = 2048;             // samples kept per GPU (even; >= 2)
  // The library to load; empty: TORCHNECK_NVML_LIBRARY when set, else
  // libnvidia-ml.so.1.
  std::string library;
  // The driver's library, loaded when none is named; its absence means a
  // machine without an NVIDIA driver (tests name one that is not there).
  std::string default_library = "libnvidia-ml.so.1";
  // How long stop() waits for the thread inside an NVML call (one takes
  // milliseconds; a call stuck longer is a driver in trouble, and the
  // report must still be written).
  int64_t stop_wait_ns = 2'000'000'000;
};

// The GPUs sampled at most: 16 covers every machine NVML's own tools are
// used on (8 per node is the common maximum; 16 on the largest boards).
constexpr size_t kNvmlMaxDevices = 16;

enum class NvmlStart {
  kStarted,
  // Nothing to sample and nothing to say: the default library is not on
  // this machine (a CPU-only one), or no GPU is visible
  // (CUDA_VISIBLE_DEVICES="" or no device). The report stays as without
  // the sampler.
  kAbsent,
  // NVML is there but cannot be used (no driver, missing functions, the
  // library TORCHNECK_NVML_LIBRARY names cannot be loaded): *error says
  // why, in one line, for the report's notes.
  kFailed,
};

// Loads NVML, picks the devices and starts the thread (a first sample at once).
NvmlStart start_nvml_sampler(const NvmlSamplerOptions& options, std::string* error);
// Stops the thread, which takes a last sample first. Waits at most
// options.stop_wait_ns for it (it may be stuck inside an NVML call); a
// thread still stuck then is left behind, with the library loaded, and
// noted, never joined forever.
void stop_nvml_sampler();
// Copies the devices and samples so far into run, without stopping (spills).
// Waits at most wait_ns for the sampler thread's lock.
bool snapshot_nvml_sampler(Run& run, int64_t wait_ns);
// After stop: moves the devices, samples and notes (a GPU lost, a thread
// left behind) into run, clears them, and shuts NVML down.
void collect_nvml_sampler(Run& run);
// In a forked child: the thread and the NVML handles are the parent's;
// forget them and their data.
void discard_nvml_sampler();

}  // namespace torchneck
