// Exact times of a Kineto trace, read from its text. The DOM gives numbers
// as doubles, which cannot hold an epoch timestamp to the nanosecond (2^53
// ns is 104 days), and HTA's microsecond rounding depends on them. One linear
// scan of the text reads, for the i-th element of "traceEvents", its "ts"
// and "dur" as written, overwriting each with a 0 of the same width (the DOM
// then parses one digit, not a 19-digit number on simdjson's slow path);
// it also finds the events array and the commas between its elements, so
// that kineto_json.cc can parse the array as a stream of small documents.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>


namespace torchneck::kineto::detail {

struct ExactTime {
  int64_t ts_ns = INT64_MIN;
  int64_t dur_ns = INT64_MIN;
  // The element has a "ph" that is or may be "X" (a complete event): an
  // upper bound on the events it gives, to size their array.
  bool maybe_complete = false;
};

// "1712195495505582.988" (microseconds) -> 1712195495505582988 ns; false
// unless the text is a plain JSON decimal whose nanoseconds fit in 64 bits.
bool decimal_us_to_ns(const char* p, const char* end, int64_t& out);

// Where the "traceEvents" array and its elements are in the text.
struct EventsLayout {
  bool found = false;
  size_t begin = 0, end = 0;   // offsets of its '[' and ']'
  std::vector<size_t> commas;  // the commas between its elements
  size_t largest = 0;          // bytes of its largest element
  size_t elements = 0;
  bool well_separated = true;  // exactly one comma between elements
};

// Text still being written by another thread (trace_file.h's
// ArrivingText): wait(n) returns once at least n bytes, or all there will
// be, are there, and how many are; finish() waits for the writer and says
// whether the text is whole (if not, the caller reads the file again).
class TextArrival {
 public:
  virtual size_t wait(size_t bytes) = 0;
  virtual bool finish() = 0;

 protected:
  ~TextArrival() = default;
};

// Reads the text 64 bytes at a time, as simdjson's first stage does: masks
// of the quotes, backslashes and structural characters of each block, the
// bytes inside strings by a prefix XOR of the unescaped quotes, then a walk
// over the structural characters outside strings only (inside a value it
// skips, over its brackets only). Exact on valid JSON; on invalid JSON it
// only promises not to make it valid (a number it blanks is a whole JSON
// number between a ':' and the next ',' or '}') and to stay inside the text
// (tests/cpp/ingest_scanner_test.cc: against a byte-by-byte scan).
class TimeScanner {
 public:
  // Reads `text`, and overwrites each "ts"/"dur" number it reads exactly
  // with a 0 of the same width (the buffer is ours: a padded copy). Reads
  // nothing past text + size.
  explicit TimeScanner(char* text, size_t size) : base_(text), end_(text + size) {}
  // The text arrives as it is scanned: each block of it is waited for.
  void arriving(TextArrival* a) { arriving_ = a; }

  EventsLayout layout;

  // Per element of the top-level "traceEvents" array, in order.
  std::vector<ExactTime> scan();

  // For a scan in two parts (scan_times): this scanner stops when it reaches
  // `at` at the start of an element of the events array (stopped() is then
  // true), and defers what it would blank at or after `at`.
  void stop_at(const char* at) { stop_at_ = defer_from_ = at; }
  bool stopped() const { return stopped_; }
  // The second part: scans from `at` as if it were the start of an element
  // of the events array after `before` elements, to the end; blanks nothing
  // (all deferred).
  std::vector<ExactTime> scan_from(const char* at, size_t before);
  // The blanks deferred: (offset, length) of each number read.
  std::vector<std::pair<size_t, size_t>> deferred;
  void blank_deferred(char* text) const {
    for (const auto& [at, n] : deferred) {
      text[at] = '0';
      std::memset(text + at + 1, ' ', n - 1);
    }
  }

 private:
  enum class Mode : uint8_t { kTop, kEvents, kElement, kSkip, kDone };
  enum Key : uint8_t { kNone, kTs, kDur, kPh };

  // Room for an element per 128 bytes of text (Kineto's events are 150 to
  // 300: v100_resnet_rank0 has one per 224): growing by doubling copies,
  // and each copy faults in fresh pages; but capacity is not free either, in
  // huge pages a touched page is 2 MiB.
  void reserve(std::vector<ExactTime>& out, size_t bytes) {
    out.reserve(bytes / 128 + 16);
    layout.commas.reserve(bytes / 128 + 16);
  }
  // The walk from `from` (outside any string) to the end of the text.
  void walk(const char* from, std::vector<ExactTime>& out);
  // One structural character outside strings, at p; false: stop the walk.
  bool step(const char* p, std::vector<ExactTime>& out);
  const char* skip_ws(const char* p) const {
    while (p < end_ && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
    return p;
  }
  // The key whose closing quote is the last byte before `colon` (blanks
  // aside), if it is "ts", "dur", "ph" or "traceEvents" as written.
  bool key_is(const char* colon, std::string_view key) const;
  Key key_at(const char* colon) const;
  // An unescaped '"' at q (an even run of backslashes before it).
  bool real_quote(const char* q) const;
  void value(const char* end);  // the value of the pending key: [value_, end)
  void element_done(const char* last, std::vector<ExactTime>& out);
  // A scalar or string element between the last separator and p: false if
  // there is none.
  bool scalar_element(const char* p, std::vector<ExactTime>& out);

  const char* base_;
  const char* end_;
  TextArrival* arriving_ = nullptr;
  const char* stop_at_ = nullptr;
  const char* defer_from_ = reinterpret_cast<const char*>(UINTPTR_MAX);  // blanks from here on are deferred
  bool stopped_ = false;
  size_t elements_before_ = 0;

  Mode mode_ = Mode::kTop;
  Mode skip_return_ = Mode::kTop;  // where a skipped value's walk goes back to
  size_t skip_depth_ = 0;
  bool expect_element_ = true;
  bool events_closed_ = false;         // its ']' was read
  const char* events_colon_ = nullptr;  // the ':' after "traceEvents"
  const char* separator_ = nullptr;    // the last '[' or ',' of the events array
  const char* element_ = nullptr;      // where the current element starts
  Key key_ = kNone;                    // of the element's value being read
  const char* value_ = nullptr;        // just after its ':' (blanks are skipped at its end: the
                                       // bytes past the current one may not have arrived)
  ExactTime current_;
};

// The times and layout of a trace's text, as TimeScanner::scan gives them.
// A large text (at least `min_split` bytes) is scanned in two parts on two
// threads: the second from a guessed element boundary past the middle (a
// line starting with '{' after a line ending in ','); the guess holds only
// if the first part's scan arrives there at the start of an element, and
// otherwise the first part's scan goes on to the end alone. Same result
// either way (tests/cpp/ingest_scanner_test.cc).
struct ScannedTimes {
  std::vector<ExactTime> times;
  EventsLayout layout;
  bool in_two = false;  // the guess held
};
// `arriving`: the text is still being written (one part, then).
ScannedTimes scan_times(char* text, size_t size, size_t min_split = size_t{1} << 20, TextArrival* arriving = nullptr);

}  // namespace torchneck::kineto::detail
