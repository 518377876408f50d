#include "core/big_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace torchneck {
namespace {

constexpr size_t kHuge = size_t{2} << 20;

size_t mapped_size(size_t bytes) { return (bytes + kHuge - 1) / kHuge * kHuge; }

}  // namespace

void* big_alloc(size_t bytes) {
  if (bytes < kBigMemoryMin) return ::operator new(bytes == 0 ? 1 : bytes);
  const size_t len = mapped_size(bytes);
  if (len < bytes || len + kHuge < len) throw std::bad_alloc();
  // One huge page more than needed, then the unaligned head and tail given
  // back: what is left starts on a 2 MiB boundary.
  void* raw = ::mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHuge - 1) & ~(kHuge - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  const uintptr_t end = start + len + kHuge;
  if (end > aligned + len) ::munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  ::madvise(p, len, MADV_HUGEPAGE);  // ignored where THP is off: 4 KiB pages, as malloc's
#endif
  return p;
}

void big_free(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes < kBigMemoryMin) {
    ::operator delete(p);
    return;
  }
  ::munmap(p, mapped_size(bytes));
}

BigBytes::BigBytes(size_t size, size_t padding) : size_(size), capacity_(size + padding) {
  if (capacity_ < size) throw std::bad_alloc();
  data_ = static_cast<char*>(big_alloc(capacity_));
  std::memset(data_ + size_, 0, padding);
}

BigBytes::BigBytes(const char* data, size_t size, size_t padding) : BigBytes(size, padding) {
  if (size > 0) std::memcpy(data_, data, size);
}

BigBytes& BigBytes::operator=(BigBytes&& o) noexcept {
  if (this != &o) {
    big_free(data_, capacity_);
    data_ = o.data_;
    size_ = o.size_;
    capacity_ = o.capacity_;
    o.data_ = nullptr;
    o.size_ = o.capacity_ = 0;
  }
  return *this;
}

void BigBytes::resize(size_t size) {
  const size_t padding = capacity_ - size_, capacity = size + padding;
  if (capacity < size) throw std::bad_alloc();
  if (capacity_ < kBigMemoryMin || capacity < kBigMemoryMin) {  // from operator new, or to be
    BigBytes other(size, padding);
    if (size_ > 0 && size > 0) std::memcpy(other.data_, data_, std::min(size, size_));
    *this = std::move(other);
    return;
  }
  if (mapped_size(capacity) != mapped_size(capacity_)) {
    void* p = ::mremap(data_, mapped_size(capacity_), mapped_size(capacity), MREMAP_MAYMOVE);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<char*>(p);  // the huge-page advice goes with the mapping
  }
  size_ = size;
  capacity_ = capacity;
  std::memset(data_ + size_, 0, padding);
}

size_t BigBytes::release(size_t from, size_t to) {
  if (capacity_ < kBigMemoryMin || data_ == nullptr) return 0;  // not mapped: from operator new
  to = std::min(to, size_);
  const auto base = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t lo = (base + from + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = (base + to) & ~(kHuge - 1);
  if (from >= to || lo >= hi || ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) != 0) return 0;
  return hi - base;
}

BigBytes::~BigBytes() { big_free(data_, capacity_); }

}  // namespace torchneck
