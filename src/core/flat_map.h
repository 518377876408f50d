// A small open-addressing hash map from non-zero 64-bit keys to 32-bit
// values, for hot-path lookups (code object → function, caller/callee pair →
// edge). Lookups never allocate; inserts allocate only when the table grows.
#pragma once

#include <cstdint>
#include <vector>

namespace torchneck {

class FlatMap64 {
 public:
  static constexpr uint32_t kMissing = 0xffffffffu;

  explicit FlatMap64(size_t initial_capacity = 64) {
    size_t cap = 16;
    while (cap < initial_capacity) cap <<= 1;
    slots_.resize(cap);
  }

  // Key 0 is reserved as "empty".
  uint32_t find(uint64_t key) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.key == key) return s.value;
      if (s.key == 0) return kMissing;
    }
  }

  void insert(uint64_t key, uint32_t value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place(key, value);
    ++size_;
  }

  size_t size() const { return size_; }
  void clear() {
    for (Slot& s : slots_) s = Slot{};
    size_ = 0;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t value = 0;
  };
  static uint64_t mix(uint64_t k) {  // splitmix64 finaliser: pointers are aligned
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ULL;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebULL;
    k ^= k >> 31;
    return k;
  }
  void place(uint64_t key, uint32_t value) {
    const size_t mask = slots_.size() - 1;
    size_t i = mix(key) & mask;
    while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask;
    slots_[i] = Slot{key, value};
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.key != 0) place(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace torchneck
