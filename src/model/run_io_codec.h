// The spill format's byte codec: the Writer frames each section's bytes in
// checksummed blocks, read_section reads them back verified, and the Reader
// decodes one section's verified bytes. Internal to src/model/run_io*.cc;
// the format itself, its version and its sections are run_io.cc's.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "model/run.h"

namespace torchneck::run_io_detail {

// The format's version, written in the header; a spill of another version is
// refused by name. It names one spill_layout(): raise it whenever that
// changes and set kSpillLayoutCrc to the new layout's CRC-32 (a test holds
// the two together).
constexpr uint32_t kSpillVersion = 18;
constexpr uint32_t kSpillLayoutCrc = 0x4299d51b;

// A section is stored as one or more blocks, each: a 4-byte word (the
// payload's length, kLastBlock set on the section's last block), the CRC-32
// of the section's index, the block's index within it, the word and the
// payload, then the payload. Every block but a section's last is kMaxBlock
// long; a reader allocates no more than one block ahead of what it has read.
constexpr uint32_t kLastBlock = 0x8000'0000u;
constexpr size_t kBlockFrame = 8;
constexpr size_t kMaxBlock = 256 * 1024;

uint32_t block_checksum(uint32_t section, uint32_t block, uint32_t word, std::string_view payload);

// UTF-8 as Python decodes it (no overlong forms, surrogates or code points
// past U+10FFFF): the names the report hands to Python as str.
bool is_valid_utf8(std::string_view s);
// S with each invalid sequence replaced by U+FFFD.
std::string valid_utf8(std::string_view s);

class Writer {
 public:
  using Sink = std::function<void(std::string_view)>;
  // Each block goes to `sink` as it fills (save_run: the file is written as
  // it is encoded, never whole in memory).
  explicit Writer(const Sink& sink) : sink_(sink) { block_.reserve(kBlockFrame + kMaxBlock); }

  void begin_section(uint32_t index);
  void end_section();  // its last block, which may be empty

  template <typename T>
  void num(T v) {
    static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T>);
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));  // the machines we target are little-endian
    bytes({b, sizeof(T)});
  }
  // Not valid UTF-8 (a thread name cut mid-character) is stored with U+FFFD,
  // since a reader refuses it as damage.
  void str(const std::string& s) {
    if (is_valid_utf8(s)) return raw_str(s);
    raw_str(valid_utf8(s));
  }
  void strs(const std::vector<std::string>& v) {
    num<uint64_t>(v.size());
    for (const auto& s : v) str(s);
  }

 private:
  void raw_str(std::string_view s) {
    num<uint64_t>(s.size());
    bytes(s);
  }
  void bytes(std::string_view b);
  void emit_block(bool last);

  const Sink& sink_;
  std::string block_;  // the frame's kBlockFrame bytes, then the payload so far
  uint32_t section_ = 0;
  uint32_t blocks_ = 0;  // in this section so far
};

// The spill's bytes read front to back: from memory, or from a regular file
// of a known size (never past it).
class Input {
 public:
  explicit Input(std::string_view bytes) : bytes_(bytes), size_(bytes.size()) {}
  Input(int fd, uint64_t size) : fd_(fd), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  // N bytes (N <= left()), or false when the file ended before them or could
  // not be read.
  bool read(char* into, size_t n);

 private:
  std::string_view bytes_;
  int fd_ = -1;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// Throws std::runtime_error("byte N: WHY").
[[noreturn]] void fail_at(uint64_t byte, const std::string& why);

// One section's payload, its blocks verified, and where each block's payload
// lies in the file (for errors that name a byte).
struct SectionBytes {
  std::string payload;
  std::vector<std::pair<size_t, uint64_t>> blocks;  // (offset in payload, offset in file)
};
SectionBytes read_section(Input& in, uint32_t index, const char* name);

class Reader {
 public:
  Reader(const SectionBytes& s, const char* name) : s_(s), b_(s.payload), name_(name) {}

  template <typename T>
  T num() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  bool boolean() {
    const size_t at = pos_;
    const uint8_t v = num<uint8_t>();
    if (v > 1) fail_from(at, "a boolean is neither 0 nor 1");
    return v == 1;
  }
  std::string str() {
    const uint64_t n = num<uint64_t>();
    need(n);
    std::string s(b_.data() + pos_, n);
    if (!is_valid_utf8(s)) fail("a name is not valid UTF-8");
    pos_ += n;
    return s;
  }
  // A count of items each at least `min_bytes` long: checked against what
  // is left, so a corrupt count cannot make us allocate without bound.
  size_t count(size_t min_bytes) {
    const size_t at = pos_;
    const uint64_t n = num<uint64_t>();
    if (min_bytes > 0 && n > (b_.size() - pos_) / min_bytes)
      fail_from(at, "a count is larger than the rest of the section");
    return static_cast<size_t>(n);
  }
  std::vector<std::string> strs() {
    std::vector<std::string> v(count(8));
    for (auto& s : v) s = str();
    return v;
  }
  uint32_t index(size_t limit, const char* what) {
    const size_t at = pos_;
    const uint32_t v = num<uint32_t>();
    if (v >= limit) fail_from(at, std::string("a ") + what + " index is out of range");
    return v;
  }
  bool done() const { return pos_ == b_.size(); }
  // Throws std::runtime_error("byte N: section 'NAME': WHY"), N the file
  // offset of the byte being read (fail_from: of the section's byte `pos`).
  [[noreturn]] void fail(const std::string& why) const { fail_from(pos_, why); }
  [[noreturn]] void fail_from(size_t pos, const std::string& why) const;

 private:
  void need(uint64_t n) const {
    if (n > b_.size() - pos_) fail("a length runs past the section's end");
  }
  const SectionBytes& s_;
  const std::string& b_;
  const char* name_;
  size_t pos_ = 0;
};

// An enum stored as its string (model/run_enums.h), so that the format does
// not depend on the enum's numbering; an unknown one is a load error.
template <typename FromString>
auto from_stored(Reader& r, FromString from_string) {
  const std::string s = r.str();
  try {
    return from_string(s);
  } catch (const std::invalid_argument& e) {
    r.fail(e.what());
  }
}

// The sections, in their stored order (run_io_sections.cc).
void encode_sections(Writer& w, const Run& run);
// Reads and checks every section; throws as read_section and Reader do.
void decode_sections(Input& in, Run& run);
// The format spelled out, a line a section, a token a field: what
// kSpillVersion names.
std::string spill_layout();

}  // namespace torchneck::run_io_detail
