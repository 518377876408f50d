// torch's CPU allocator, counted: the bytes its tensors' storages hold now.
// torch keeps no such total for the CPU (its ProfiledCPUMemoryReporter counts
// only while torch.profiler records memory, under a lock and a hash map per
// allocation), so the counter puts a thin allocator in front of torch's own
// (c10::SetCPUAllocator): every allocation is forwarded unchanged and its
// usable size added to one relaxed atomic; the deleter it returns subtracts
// the same size and calls torch's deleter. No lock, no allocation, no map.
//
// What it counts: storages allocated by torch's default CPU allocator after
// start, while they live (a storage allocated before start frees through
// torch's own deleter and is in neither total). Pinned memory, shared-memory
// storages of DataLoader workers, numpy-backed tensors and CUDA memory have
// allocators of their own and are not counted.
//
// This header has no torch include; only cpu_allocator.cc sees c10.
#pragma once

#include <cstdint>
#include <string>

namespace torchneck {

// Puts the counting allocator in front of torch's CPU allocator. Returns
// false with *error set when it cannot count safely: another allocator than
// torch's default is installed (its memory may not come from malloc), or the
// default one does not guarantee a single deleter. Calling it again while
// counting is a no-op that returns true.
bool start_cpu_allocator_count(std::string* error);

// Puts torch's allocator back. Storages allocated while counting keep the
// counting deleter (it stays valid: the extension is never unloaded) and
// still subtract what they added.
void stop_cpu_allocator_count();

// The bytes counted now; -1 when not counting. Safe from any thread.
int64_t cpu_allocator_bytes();

}  // namespace torchneck
