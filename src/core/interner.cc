#include "core/interner.h"

#include <pthread.h>

#include <cstring>
#include <stdexcept>

namespace torchneck {

uint32_t StringInterner::intern(std::string_view s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
  strings_.emplace_back(s);
  const auto id = static_cast<uint32_t>(strings_.size() - 1);
  index_.emplace(std::string_view(strings_.back()), id);
  return id;
}

std::string_view StringInterner::lookup(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id >= strings_.size()) throw std::out_of_range("unknown string id");
  return strings_[id];
}

size_t StringInterner::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return strings_.size();
}

StringInterner& StringInterner::global() {
  // Leaked on purpose: collectors on other threads may still intern while
  // static destructors run at interpreter exit.
  static auto* interner = [] {
    auto* i = new StringInterner();
    pthread_atfork(&lock_global_for_fork, &unlock_global_after_fork, &unlock_global_after_fork);
    return i;
  }();
  return *interner;
}

void StringInterner::lock_global_for_fork() { global().mu_.lock(); }
void StringInterner::unlock_global_after_fork() { global().mu_.unlock(); }

uint64_t hash_bytes(const char* data, size_t len) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < len; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ULL;
  }
  return h;
}

InternCache::InternCache(StringInterner* backing, size_t initial_capacity)
    : backing_(backing), by_address_(kAddressSlots) {
  size_t cap = 16;
  while (cap < initial_capacity) cap <<= 1;
  slots_.resize(cap);
}

uint32_t InternCache::intern(const char* s) {
  const auto a = reinterpret_cast<uintptr_t>(s);
  AddressSlot& slot = by_address_[((a * 0x9E3779B97F4A7C15ULL) >> 40) & (kAddressSlots - 1)];
  if (slot.address == s && std::memcmp(s, slot.text, slot.len) == 0 && s[slot.len] == '\0') return slot.id;
  const std::string_view view(s, std::strlen(s));
  const char* text = nullptr;
  const uint32_t id = intern(view, &text);
  slot = AddressSlot{s, text, static_cast<uint32_t>(view.size()), id};
  return id;
}

uint32_t InternCache::intern(std::string_view s) { return intern(s, nullptr); }

uint32_t InternCache::intern(std::string_view s, const char** text_out) {
  const uint64_t h = hash_bytes(s.data(), s.size());
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Slot& slot = slots_[i];
    if (!slot.used) break;
    // Equal hashes are confirmed against the interned text, so a 64-bit
    // collision can never merge two names.
    if (slot.hash == h && slot.text == s) {
      if (text_out != nullptr) *text_out = slot.text.data();
      return slot.id;
    }
  }
  const uint32_t id = backing_->intern(s);
  const std::string_view text = backing_->lookup(id);
  if (text_out != nullptr) *text_out = text.data();
  if ((used_ + 1) * 2 > slots_.size()) grow();
  const size_t mask2 = slots_.size() - 1;
  size_t i = h & mask2;
  while (slots_[i].used) i = (i + 1) & mask2;
  slots_[i] = Slot{h, text, id, true};
  ++used_;
  return id;
}

void InternCache::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (!s.used) continue;
    size_t i = s.hash & mask;
    while (slots_[i].used) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

}  // namespace torchneck
