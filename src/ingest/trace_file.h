// A trace file's text, gunzipped if it is gzip (ISA-L for one member of the
// size the trailer says; zlib otherwise, which also names damage), straight
// into one padded buffer of the final size (huge pages: core/big_memory.h),
// as simdjson reads it: at once (read_trace_file), or on a helper thread
// while the caller scans what has arrived (ArrivingText).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/big_memory.h"
#include "ingest/exact_times.h"
#include "simdjson.h"

namespace torchneck::kineto::detail {

// Throws std::runtime_error "PATH: ..." (with "byte N" for damaged gzip).
// The text has SIMDJSON_PADDING zero bytes after it.
BigBytes read_trace_file(const std::string& path);

// The text of a file of known size, read (and gunzipped) on a helper
// thread into text() while the caller reads what has arrived: on the two
// cores this was measured on, gunzip and its page faults run beside the
// scan instead of before it. Anything unusual (a gzip of several members, a
// wrong size in its trailer, damage, a file that changes size) and finish()
// says false: read_trace_file then reads it again and says what is wrong.
class ArrivingText final : public TextArrival {
 public:
  // nullptr when the file cannot be read this way (not a regular file, a
  // gzip too short to hold a trailer); throws "PATH: cannot open (...)".
  static std::unique_ptr<ArrivingText> open(const std::string& path);
  ~ArrivingText();
  ArrivingText(const ArrivingText&) = delete;
  ArrivingText& operator=(const ArrivingText&) = delete;

  BigBytes& text() { return text_; }
  size_t wait(size_t bytes) override;
  bool finish() override;

 private:
  ArrivingText() = default;
  bool start(const std::function<void()>& work);  // the helper thread; false if there is none
  void publish(size_t bytes, bool done);
  void inflate_gzip();
  void read_plain();
  void unmap_gz();

  static constexpr uint64_t kDone = uint64_t{1} << 63;
  std::FILE* file_ = nullptr;
  const char* gz_ = nullptr;  // the compressed file, mapped
  size_t gz_size_ = 0;
  BigBytes text_;
  std::atomic<uint64_t> state_{0};  // bytes there, | kDone when the helper is done
  std::atomic<bool> stop_{false};
  bool whole_ = false;              // written by the helper before kDone
  std::thread helper_;
};

}  // namespace torchneck::kineto::detail
