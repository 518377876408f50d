// Resident memory over the run: a native thread that reads /proc/self/statm
// every interval into a fixed, preallocated buffer (Run::memory). No Python,
// no torch: it never takes the GIL and costs the training loop nothing but
// one short read of a /proc file per interval on another thread.
//
// Bounded for a run of any length: when the buffer is full every other
// sample is dropped and the interval doubles, so the samples always span
// the whole run (model/run.h, MemorySample).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collect/system/thinned_series.h"
#include "model/run.h"

namespace torchneck {

struct MemorySamplerOptions {
  int64_t interval_ns = 100'000'000;  // --memory-interval-ms
  size_t capacity = 4096;             // samples kept (even; >= 2)
  // torch's CPU allocator in use now, -1 unknown (collect/torch/cpu_allocator.h;
  // a pointer, so this file needs no torch): read beside every resident sample.
  int64_t (*torch_allocated)() = nullptr;
};

// The samples kept, thinned by halving when full (thinned_series.h): the
// part of the sampler that needs no thread, for tests.
using MemorySeries = ThinnedSeries<MemorySample>;

// Resident bytes of this process now (/proc/self/statm), -1 when unreadable.
int64_t resident_bytes();

// Starts the thread (a first sample at once). Returns false with *error set
// when /proc/self/statm cannot be read.
bool start_memory_sampler(const MemorySamplerOptions& options, std::string* error);
// Takes a last sample and joins the thread.
void stop_memory_sampler();
// Copies the samples so far into run.memory, without stopping (spills).
// Waits at most wait_ns for the sampler thread's lock.
bool snapshot_memory_sampler(Run& run, int64_t wait_ns);
// After stop: moves the samples into run.memory and clears them.
void collect_memory_sampler(Run& run);
// In a forked child: the thread is the parent's; forget it and its data.
void discard_memory_sampler();

}  // namespace torchneck
