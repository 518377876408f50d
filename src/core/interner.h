// String interning: every name a collector sees (operator, Python function,
// file) becomes a 32-bit id once, so hot-path records carry integers only.
//
// StringInterner is the process-wide table (a mutex, taken only when a name is
// seen for the first time by a thread). InternCache is a per-thread,
// lock-free front: open addressing on the string's content, so the same name
// given at different addresses (Python strings, RecordFunction user scopes)
// still maps to one id, and a freed-and-reused address never aliases.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace torchneck {

class StringInterner {
 public:
  // Returns the id of `s`, adding it if new. Thread-safe.
  uint32_t intern(std::string_view s);
  // The string behind an id. The view stays valid for the interner's life.
  std::string_view lookup(uint32_t id) const;
  size_t size() const;

  static StringInterner& global();

 private:
  // fork() while another thread holds mu_ would leave it locked forever in
  // the child (a DataLoader worker): global() registers these with
  // pthread_atfork so fork happens with mu_ held by the forking thread.
  static void lock_global_for_fork();
  static void unlock_global_after_fork();
  mutable std::mutex mu_;
  std::deque<std::string> strings_;  // deque: stable addresses on growth
  std::unordered_map<std::string_view, uint32_t> index_;
};

// 64-bit FNV-1a; names are short, so this is cheaper than anything fancier.
uint64_t hash_bytes(const char* data, size_t len);

class InternCache {
 public:
  explicit InternCache(StringInterner* backing = &StringInterner::global(),
                       size_t initial_capacity = 256);

  // Hot path: a probe with no lock and no allocation once `s` has been seen
  // by this cache. The table grows (allocates) only when it is half full.
  // A C string is first looked up by its address (a dispatcher op's name
  // lives in its schema for the process's life): a hit is confirmed by
  // comparing the text (memcmp, and the terminating NUL), so an address
  // reused for another name never aliases; a miss falls back to the
  // content hash.
  uint32_t intern(const char* s);
  uint32_t intern(std::string_view s);

  size_t size() const { return used_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    std::string_view text;  // points into the interner's stable storage
    uint32_t id = 0;
    bool used = false;
  };
  void grow();
  // intern(s), and where the interned copy of s is (for the address table).
  uint32_t intern(std::string_view s, const char** text_out);

  struct AddressSlot {
    const char* address = nullptr;
    const char* text = nullptr;  // the interned copy, to confirm a hit
    uint32_t len = 0;
    uint32_t id = 0;
  };
  static constexpr size_t kAddressSlots = 1024;  // direct-mapped: a step's distinct op names fit

  StringInterner* backing_;
  std::vector<Slot> slots_;
  std::vector<AddressSlot> by_address_;
  size_t used_ = 0;
};

}  // namespace torchneck
