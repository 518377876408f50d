// The counting CPU allocator (cpu_allocator.h).
#include "collect/torch/cpu_allocator.h"

#include <malloc.h>

#include <atomic>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

// torch 2.3 made Allocator::allocate non-const and added copy_data.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define TORCHNECK_ALLOCATOR_V2 1
#define TORCHNECK_ALLOCATE_CONST
#else
#define TORCHNECK_ALLOCATOR_V2 0
#define TORCHNECK_ALLOCATE_CONST const
#endif

namespace torchneck {
namespace {

// Bytes held by the storages the counting allocator handed out. Relaxed:
// a sample reads a total, it orders nothing.
std::atomic<int64_t> g_bytes{0};
std::atomic<bool> g_counting{false};
// torch's deleter, the same for every allocation (raw_deleter's contract).
c10::DeleterFnPtr g_inner_delete = nullptr;

int64_t usable(void* p) { return p == nullptr ? 0 : static_cast<int64_t>(malloc_usable_size(p)); }

void counted_delete(void* p) {
  g_bytes.fetch_sub(usable(p), std::memory_order_relaxed);
  g_inner_delete(p);
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) TORCHNECK_ALLOCATE_CONST override {
    c10::DataPtr inner = inner_->allocate(n);
    // raw_deleter's contract: the data is its own context, with the one
    // deleter. Release it from torch's DataPtr into ours.
    const c10::Device device = inner.device();
    void* p = inner.release_context();
    g_bytes.fetch_add(usable(p), std::memory_order_relaxed);
    return {p, p, &counted_delete, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &counted_delete; }

#if TORCHNECK_ALLOCATOR_V2
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

  c10::Allocator* inner() const { return inner_; }

 private:
  c10::Allocator* inner_;
};

// Never destroyed: storages keep a pointer to their allocator, and their
// DataPtrs the counting deleter, past any stop.
CountingAllocator* g_allocator = nullptr;

}  // namespace

bool start_cpu_allocator_count(std::string* error) {
  if (g_counting.load()) return true;
  c10::Allocator* current = c10::GetCPUAllocator();
  if (current != c10::GetDefaultCPUAllocator()) {
    *error = "torch's CPU allocator is not counted: another CPU allocator is installed";
    return false;
  }
  if (current->raw_deleter() == nullptr) {
    *error = "torch's CPU allocator is not counted: its allocations have no single deleter";
    return false;
  }
  g_inner_delete = current->raw_deleter();
  // Storages of an earlier session still subtract what they added: the
  // total stays right across sessions.
  if (g_allocator == nullptr) g_allocator = new CountingAllocator(current);
  c10::SetCPUAllocator(g_allocator, /*priority=*/0);  // the default's priority: an allocator set above it wins
  if (c10::GetCPUAllocator() != g_allocator) {
    *error = "torch's CPU allocator is not counted: a CPU allocator of higher priority is installed";
    return false;
  }
  g_counting.store(true);
  return true;
}

void stop_cpu_allocator_count() {
  if (!g_counting.exchange(false)) return;
  if (c10::GetCPUAllocator() == g_allocator) c10::SetCPUAllocator(g_allocator->inner(), 0);
}

int64_t cpu_allocator_bytes() {
  return g_counting.load(std::memory_order_relaxed) ? g_bytes.load(std::memory_order_relaxed) : -1;
}

}  // namespace torchneck
