// The spill format's byte codec (Writer, Reader) and the sections of the
// run that live in run_io_sections.cc (memory and GC, NVML, the GPU
// window); internal to src/model/run_io*.cc. The format itself, its
// version and its order are run_io.cc's.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "model/run.h"

namespace torchneck::run_io_detail {

class Writer {
 public:
  Writer() = default;
  // Pieces of about kPiece bytes handed to `sink` as they fill (save_run:
  // the file is written as it is encoded, never whole in memory: at a
  // tiny_ops run's end the whole spill grew a 5 MB string by doubling, a
  // peak of ~12 MB); the rest with flush().
  explicit Writer(const std::function<void(std::string_view)>& sink) : sink_(&sink) { out.reserve(2 * kPiece); }
  static constexpr size_t kPiece = 256 * 1024;

  template <typename T>
  void num(T v) {
    static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T>);
    if (sink_ != nullptr && out.size() >= kPiece) flush();
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));  // the machines we target are little-endian
    out.append(reinterpret_cast<const char*>(b), sizeof(T));
  }
  void str(const std::string& s) {
    num<uint64_t>(s.size());
    out.append(s);
  }
  void strs(const std::vector<std::string>& v) {
    num<uint64_t>(v.size());
    for (const auto& s : v) str(s);
  }
  void flush() {
    if (sink_ == nullptr || out.empty()) return;
    (*sink_)(out);
    out.clear();
  }
  std::string out;

 private:
  const std::function<void(std::string_view)>* sink_ = nullptr;
};

class Reader {
 public:
  explicit Reader(const std::string& b) : b_(b) {}

  template <typename T>
  T num() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  bool boolean() {
    const uint8_t v = num<uint8_t>();
    if (v > 1) fail("a boolean is neither 0 nor 1");
    return v == 1;
  }
  std::string str() {
    const uint64_t n = num<uint64_t>();
    need(n);
    std::string s(b_.data() + pos_, n);
    pos_ += n;
    return s;
  }
  // A count of items each at least `min_bytes` long: checked against what
  // is left, so a corrupt count cannot make us allocate without bound.
  size_t count(size_t min_bytes) {
    const uint64_t n = num<uint64_t>();
    if (min_bytes > 0 && n > (b_.size() - pos_) / min_bytes) fail("a count is larger than the rest of the file");
    return static_cast<size_t>(n);
  }
  std::vector<std::string> strs() {
    std::vector<std::string> v(count(8));
    for (auto& s : v) s = str();
    return v;
  }
  uint32_t index(size_t limit, const char* what) {
    const uint32_t v = num<uint32_t>();
    if (v >= limit) fail(std::string("a ") + what + " index is out of range");
    return v;
  }
  size_t pos() const { return pos_; }
  bool done() const { return pos_ == b_.size(); }
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error(why + " at byte " + std::to_string(pos_));
  }

 private:
  void need(uint64_t n) const {
    if (n > b_.size() - pos_) fail("the file ends early (truncated)");
  }
  const std::string& b_;
  size_t pos_ = 0;
};

void put_memory_and_gc(Writer& w, const Run& run);
void get_memory_and_gc(Reader& r, Run& run);
void put_nvml(Writer& w, const Run& run);
void get_nvml(Reader& r, Run& run);
void put_gpu_window(Writer& w, const GpuWindow& g);
void get_gpu_window(Reader& r, GpuWindow& g);
void put_experiments(Writer& w, const Run& run);
void get_experiments(Reader& r, Run& run);
void put_rank(Writer& w, const Run& run);  // RankInfo and the collectives
void get_rank(Reader& r, Run& run);

}  // namespace torchneck::run_io_detail
