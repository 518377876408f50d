// A trace file's text, gunzipped if it is gzip, into one padded buffer
// (huge pages: core/big_memory.h), as simdjson reads it: at once
// (read_trace_file: zlib, in pieces), or on a helper thread while the caller
// scans what has arrived (ArrivingText: ISA-L, for one member of the size
// the trailer says).
//
// Only a regular file is read (a FIFO or a device may never end), and its
// text is held to ReadLimits and to TextBounds as it arrives, so that a gzip
// bomb or a text too large for memory fails after a few MiB, in one line.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "core/big_memory.h"
#include "ingest/exact_times.h"
#include "ingest/read_limits.h"
#include "simdjson.h"

namespace torchneck::kineto::detail {

// "PATH: byte N: not a JSON trace (starts with 0x00)": a Kineto trace is a
// JSON object or array, and `c`, the text's first byte that is not a blank,
// at `at`, opens neither.
std::string not_a_json_trace(const std::string& path, size_t at, char c);

// The bounds of a text as it arrives, gunzipped or read as is: its first
// byte that is not a blank opens an object or an array, it is at most
// ReadLimits::max_text bytes, and gunzipped it is at most kMaxGzipRatio
// times the gzip data read so far, once past kRatioFrom bytes.
class TextBounds {
 public:
  // A Kineto trace gzips 8 to 35 times (the tests' fixture traces, gzip -1
  // to -9); zeros, the usual bomb, 229 times at gzip -1 and 1030 at -9.
  static constexpr size_t kMaxGzipRatio = 200;
  // The ratio of the first few MiB says little (a header of repeated device
  // properties compresses well); a bomb is stopped here, holding this much.
  static constexpr size_t kRatioFrom = size_t{8} << 20;

  TextBounds(std::string path, const ReadLimits& limits) : path_(std::move(path)), max_text_(limits.max_text) {}
  // `text` holds `size` bytes so far, gunzipped from the first `gzip_read`
  // bytes of a gzip file (0: read as is). False once a bound is passed;
  // refusal() then says which, in one line, and how to raise it.
  bool within(const char* text, size_t size, size_t gzip_read);
  const std::string& refusal() const { return refusal_; }
  // The refusal of a text over ReadLimits::max_text (`gunzipped`: of a gzip).
  std::string too_large(bool gunzipped) const;

 private:
  bool refuse(std::string why);

  std::string path_;
  size_t max_text_;
  size_t blanks_ = 0;    // the text's leading blanks, as far as it has arrived
  bool opened_ = false;  // its first byte that is not a blank was seen: '{' or '['
  std::string refusal_;
};

// Throws std::runtime_error "PATH: ..." (with "byte N" for damaged gzip).
// The text has SIMDJSON_PADDING zero bytes after it.
BigBytes read_trace_file(const std::string& path, const ReadLimits& limits = {});

// The text of a file of known size, read (and gunzipped) on a helper
// thread into text() while the caller reads what has arrived: gunzip and
// its page faults run beside the scan instead of before it. Anything unusual (a gzip of several members, a
// wrong size in its trailer, damage, a file that changes size, a bound of
// TextBounds passed) and finish() says false: refusal() then says which
// bound was passed, or else read_trace_file reads it again and says what is wrong.
class ArrivingText final : public TextArrival {
 public:
  // nullptr when the file cannot be read this way (empty, a gzip too short
  // to hold a trailer, or whose trailer states a size beyond the bounds);
  // throws "PATH: cannot open (...)", "PATH: not a regular file (...)", or
  // the refusal of a plain text over ReadLimits::max_text.
  static std::unique_ptr<ArrivingText> open(const std::string& path, const ReadLimits& limits = {});
  ~ArrivingText();
  ArrivingText(const ArrivingText&) = delete;
  ArrivingText& operator=(const ArrivingText&) = delete;

  BigBytes& text() { return text_; }
  size_t wait(size_t bytes) override;
  bool finish() override;
  // After finish(): the one-line error of the bound that stopped the helper; empty if none did.
  const std::string& refusal() const { return bounds_.refusal(); }

 private:
  ArrivingText(const std::string& path, const ReadLimits& limits) : bounds_(path, limits) {}
  bool start(const std::function<void()>& work);  // the helper thread; false if there is none
  void publish(size_t bytes, bool done);
  void inflate_gzip();
  void read_plain();
  void unmap_gz();

  static constexpr uint64_t kDone = uint64_t{1} << 63;
  int fd_ = -1;
  const char* gz_ = nullptr;  // the compressed file, mapped
  size_t gz_size_ = 0;
  BigBytes text_;
  TextBounds bounds_;               // the helper's
  std::atomic<uint64_t> state_{0};  // bytes there, | kDone when the helper is done
  std::atomic<bool> stop_{false};
  bool whole_ = false;              // written by the helper before kDone
  std::thread helper_;
};

}  // namespace torchneck::kineto::detail
