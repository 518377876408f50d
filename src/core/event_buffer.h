// Per-thread, append-only, bounded storage for fixed-size records.
//
// One writer thread appends; the owner reads only after the writer stopped
// (the session is stopped before buffers are drained). Memory is taken in
// chunks, so an append allocates once every kChunkRecords records at most,
// and never beyond `capacity` records: past that, records are counted as
// dropped instead of stored (DESIGN.md §2: memory is bounded, drops shown).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace torchneck {

template <typename Record, size_t kChunkRecords = 16384>
class EventBuffer {
  static_assert(std::is_trivially_copyable_v<Record>,
                "records must be plain data");

 public:
  explicit EventBuffer(size_t capacity) : capacity_(capacity) {}

  // Returns false (and counts a drop) when the buffer is full.
  bool append(const Record& r) {
    if (size_ >= capacity_) {
      ++dropped_;
      return false;
    }
    const size_t offset = size_ % kChunkRecords;
    if (offset == 0) chunks_.emplace_back(new Record[kChunkRecords]);
    chunks_.back()[offset] = r;
    ++size_;
    return true;
  }

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  uint64_t dropped() const { return dropped_; }

  const Record& operator[](size_t i) const {
    return chunks_[i / kChunkRecords][i % kChunkRecords];
  }

  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (size_t i = 0; i < size_; ++i) fn((*this)[i]);
  }

  void clear() {
    chunks_.clear();
    size_ = 0;
    dropped_ = 0;
  }

 private:
  size_t capacity_;
  size_t size_ = 0;
  uint64_t dropped_ = 0;
  std::vector<std::unique_ptr<Record[]>> chunks_;
};

}  // namespace torchneck
