// Memory for a collector's small, long-lived records that arrive while the
// user's script runs (sampled shape signatures, first seen over many steps),
// kept out of the script's malloc heap.
//
// Why: torch allocates tensors from that heap (glibc's main arena on the main
// thread). A small block that torchneck mallocs between two steps and keeps
// lands between the blocks of tensors that are freed and allocated again
// every step, and a freed tensor block with a live record inside it can no
// longer take a tensor of its size: the heap grows instead. Measured on
// heavy_linear (16 MB tensors, torch 1.13, glibc's thresholds pinned as in
// benchmarks/overhead): signatures sampled at 5 %, kept in std::string and
// std::vector, raised the run's peak RSS by 30-41 MB over plain at 80 steps,
// more the longer the run (new signatures keep arriving at 5 %); with every
// signature seen in the first step (sampling at 100 %) or none, by 5-9 MB.
// (EventBuffer maps its chunks for the same reason and for page faults.)
//
// Chunks are mapped (never from malloc), with MAP_POPULATE for the reason in
// event_buffer.h. One writer; the memory stays put until reset() or
// destruction, so a reader that holds the writer off (a spill's freeze) may
// read what it points to.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace torchneck {

class SideArena {
 public:
  // 64 KiB: the records of a typical run fit in one or two chunks, and a
  // populated chunk costs ~20 us once.
  static constexpr size_t kChunkBytes = size_t{64} << 10;

  SideArena() = default;
  SideArena(const SideArena&) = delete;
  SideArena& operator=(const SideArena&) = delete;
  ~SideArena() { reset(); }

  // `bytes` of memory aligned to 8, or nullptr when no memory can be mapped
  // (the caller drops the record, never crashes). Larger than a chunk: a
  // mapping of its own.
  void* allocate(size_t bytes) {
    bytes = (bytes + 7) & ~size_t{7};
    if (bytes > kChunkBytes) return map(bytes);
    if (current_ == nullptr || used_ + bytes > kChunkBytes) {
      current_ = static_cast<char*>(map(kChunkBytes));
      used_ = 0;
      if (current_ == nullptr) return nullptr;
    }
    void* p = current_ + used_;
    used_ += bytes;
    return p;
  }

  // A copy of [data, data + size), not NUL-terminated; nullptr as allocate.
  const char* copy(const char* data, size_t size) {
    void* p = allocate(size == 0 ? 1 : size);
    if (p != nullptr && size != 0) std::memcpy(p, data, size);
    return static_cast<const char*>(p);
  }

  // Unmaps everything; pointers handed out before are invalid after.
  void reset() {
    for (auto& m : mappings_) munmap(m.first, m.second);
    mappings_.clear();
    current_ = nullptr;
    used_ = 0;
  }

  size_t mapped_bytes() const {
    size_t n = 0;
    for (const auto& m : mappings_) n += m.second;
    return n;
  }

 private:
  void* map(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    mappings_.emplace_back(p, bytes);
    return p;
  }

  // (address, length) of every mapping; the list itself is malloc'd, but
  // grows once per mapping, i.e. rarely.
  std::vector<std::pair<void*, size_t>> mappings_;
  char* current_ = nullptr;  // the chunk being filled
  size_t used_ = 0;          // bytes used in it
};

}  // namespace torchneck
