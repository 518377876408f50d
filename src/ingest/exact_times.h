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

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

class TimeScanner {
 public:
  // Reads `text`, and overwrites each "ts"/"dur" number it reads exactly
  // with a 0 of the same width (the buffer is ours: a padded copy). At least
  // 16 readable bytes must follow text + size (simdjson's padding: 64): the
  // byte searches read 16 at a time and ignore what lies past the end.
  explicit TimeScanner(char* text, size_t size) : base_(text), p_(text), end_(text + size) {}

  EventsLayout layout;

  // Per element of the top-level "traceEvents" array, in order.
  std::vector<ExactTime> scan() {
    std::vector<ExactTime> out;
    reserve(out, static_cast<size_t>(end_ - p_));
    ws();
    if (p_ >= end_ || *p_ != '{') return out;
    ++p_;
    top_level(out);
    return out;
  }

  // For a scan in two parts (scan_times): this scanner stops when it reaches
  // `at` at the start of an element of the events array (stopped() is then
  // true), and defers what it would blank at or after `at`.
  void stop_at(const char* at) { stop_at_ = defer_from_ = at; }
  bool stopped() const { return stopped_; }
  // The second part: scans from `at` as if it were the start of an element
  // of the events array after `before` elements, to the end; blanks nothing
  // (all deferred).
  std::vector<ExactTime> scan_from(const char* at, size_t before) {
    std::vector<ExactTime> out;
    reserve(out, static_cast<size_t>(end_ - at));
    deferred.reserve(static_cast<size_t>(end_ - at) / 48);
    layout.found = true;
    elements_before_ = before;
    defer_from_ = base_;
    p_ = at;
    events(out);
    layout.end = static_cast<size_t>(p_ - base_) - 1;
    top_level(out);
    return out;
  }
  // The blanks deferred: (offset, length) of each number read.
  std::vector<std::pair<size_t, size_t>> deferred;
  void blank_deferred(char* text) const {
    for (const auto& [at, n] : deferred) {
      text[at] = '0';
      std::memset(text + at + 1, ' ', n - 1);
    }
  }

 private:
  // Room for an element per 128 bytes of text (Kineto's events are 150 to
  // 300: v100_resnet_rank0 has one per 224): growing by doubling copies,
  // and each copy faults in fresh pages; but capacity is not free either, in
  // huge pages a touched page is 2 MiB.
  void reserve(std::vector<ExactTime>& out, size_t bytes) {
    out.reserve(bytes / 128 + 16);
    layout.commas.reserve(bytes / 128 + 16);
  }

  void top_level(std::vector<ExactTime>& out) {
    while (true) {
      ws();
      if (p_ >= end_ || *p_ == '}') break;
      if (*p_ == ',') {
        ++p_;
        continue;
      }
      const char* before = p_;
      const std::string_view key = string();
      ws();
      if (p_ < end_ && *p_ == ':') ++p_;
      ws();
      if (key == "traceEvents" && p_ < end_ && *p_ == '[' && !layout.found) {
        layout.found = true;
        layout.begin = static_cast<size_t>(p_ - base_);
        ++p_;
        events(out);
        if (stopped_) return;
        layout.end = static_cast<size_t>(p_ - base_) - 1;
      } else {
        skip_value();
      }
      if (p_ == before) ++p_;
    }
  }
  void ws() {
    if (p_ < end_ && static_cast<unsigned char>(*p_) > ' ') return;  // the usual case: no blank at all
#if defined(__SSE2__)
    // Pretty-printed traces indent every line: runs of blanks, 16 at a time.
    const __m128i space = _mm_set1_epi8(' '), nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'), tab = _mm_set1_epi8('\t');
    while (p_ < end_) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_));
      const __m128i blank = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, space), _mm_cmpeq_epi8(v, nl)),
                                         _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, tab)));
      const unsigned other = ~static_cast<unsigned>(_mm_movemask_epi8(blank)) & 0xFFFFu;
      if (other != 0) {
        p_ = std::min(p_ + __builtin_ctz(other), end_);
        return;
      }
      p_ += 16;
    }
    p_ = end_;
#else
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
#endif
  }
  // Short keys compared without a call.
  static bool is(std::string_view key, const char (&lit)[3]) { return key.size() == 2 && key[0] == lit[0] && key[1] == lit[1]; }
  static bool is(std::string_view key, const char (&lit)[4]) {
    return key.size() == 3 && key[0] == lit[0] && key[1] == lit[1] && key[2] == lit[2];
  }
  // At a '"': returns the raw content (escapes left as they are; keys we
  // look for have none) and moves past the closing quote.
  std::string_view string() {
    if (p_ >= end_ || *p_ != '"') return {};
    const char* start = ++p_;
    while (p_ < end_) {
      const char* q = find_quote(p_);
      if (q == end_) {
        p_ = end_;
        return {};
      }
      // The quote ends the string unless an odd number of backslashes precede it.
      size_t slashes = 0;
      for (const char* b = q - 1; b >= start && *b == '\\'; --b) ++slashes;
      p_ = q + 1;
      if (slashes % 2 == 0) return std::string_view(start, static_cast<size_t>(q - start));
    }
    return {};
  }
  // The first '"' at or after p (p < end_), or end_ if there is none before it.
  const char* find_quote(const char* p) const {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"');
    for (; p < end_; p += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      const unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)));
      if (m != 0) {
        const char* q = p + __builtin_ctz(m);
        return q < end_ ? q : end_;
      }
    }
    return end_;
#else
    const char* q = static_cast<const char*>(std::memchr(p, '"', static_cast<size_t>(end_ - p)));
    return q == nullptr ? end_ : q;
#endif
  }
  // The first of " { } [ ] at or after p (p < end_), or end_.
  const char* find_structural(const char* p) const {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}'),
                  open_sq = _mm_set1_epi8('['), close_sq = _mm_set1_epi8(']');
    for (; p < end_; p += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      const __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, open)),
                                       _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, close), _mm_cmpeq_epi8(v, open_sq)),
                                                    _mm_cmpeq_epi8(v, close_sq)));
      const unsigned m = static_cast<unsigned>(_mm_movemask_epi8(hit));
      if (m != 0) {
        const char* q = p + __builtin_ctz(m);
        return q < end_ ? q : end_;
      }
    }
    return end_;
#else
    for (; p < end_; ++p)
      if (*p == '"' || *p == '{' || *p == '}' || *p == '[' || *p == ']') return p;
    return end_;
#endif
  }
  void skip_value() {
    ws();
    if (p_ >= end_) return;
    if (*p_ == '"') {
      string();
      return;
    }
    if (*p_ == '{' || *p_ == '[') {
      int depth = 0;
      while (p_ < end_) {
        p_ = find_structural(p_);  // nothing else changes the depth
        if (p_ >= end_) return;
        const char c = *p_;
        if (c == '"') {
          string();
          continue;
        }
        ++p_;
        if (c == '{' || c == '[') ++depth;
        else if (--depth == 0) return;
      }
      return;
    }
    // A number, true, false, null: up to the next , } or ].
#if defined(__SSE2__)
    const __m128i comma = _mm_set1_epi8(','), close = _mm_set1_epi8('}'), close_sq = _mm_set1_epi8(']');
    while (p_ < end_) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_));
      const unsigned m = static_cast<unsigned>(_mm_movemask_epi8(
          _mm_or_si128(_mm_cmpeq_epi8(v, comma), _mm_or_si128(_mm_cmpeq_epi8(v, close), _mm_cmpeq_epi8(v, close_sq)))));
      if (m != 0) {
        p_ = std::min(p_ + __builtin_ctz(m), end_);
        return;
      }
      p_ += 16;
    }
    p_ = end_;
#else
    while (p_ < end_ && *p_ != ',' && *p_ != '}' && *p_ != ']') ++p_;
#endif
  }
  void events(std::vector<ExactTime>& out) {
    bool expect_element = true;
    while (true) {
      ws();
      if (p_ >= end_ || *p_ == ']') {
        if (expect_element && layout.elements + elements_before_ > 0) layout.well_separated = false;  // "...,]"
        if (p_ < end_) ++p_;
        return;
      }
      if (*p_ == ',') {
        if (expect_element) layout.well_separated = false;  // "[," or ",,"
        layout.commas.push_back(static_cast<size_t>(p_ - base_));
        expect_element = true;
        ++p_;
        continue;
      }
      if (p_ == stop_at_ && expect_element) {
        stopped_ = true;
        return;
      }
      if (!expect_element) layout.well_separated = false;  // "}{": no comma
      expect_element = false;
      ++layout.elements;
      const char* element_start = p_;
      ExactTime t;
      if (*p_ != '{') {
        const char* before = p_;
        skip_value();
        if (p_ == before) ++p_;
        layout.largest = std::max(layout.largest, static_cast<size_t>(p_ - element_start));
        out.push_back(t);
        continue;
      }
      ++p_;
      while (true) {
        ws();
        if (p_ >= end_) return;
        if (*p_ == '}') {
          ++p_;
          break;
        }
        if (*p_ == ',') {
          ++p_;
          continue;
        }
        const std::string_view key = string();
        ws();
        if (p_ < end_ && *p_ == ':') ++p_;
        ws();
        const char* start = p_;
        skip_value();  // any value, whatever its type
        int64_t ns = 0;
        if (is(key, "ph") && p_ - start >= 3 && *start == '"' &&
            ((p_ - start == 3 && start[1] == 'X' && start[2] == '"') || std::memchr(start, '\\', static_cast<size_t>(p_ - start)) != nullptr))
          t.maybe_complete = true;  // "X", or escaped and perhaps "X"
        const bool ts = is(key, "ts");
        if ((ts || is(key, "dur")) && decimal_us_to_ns(start, p_, ns)) {
          (ts ? t.ts_ns : t.dur_ns) = ns;
          // Read here, exactly: the DOM need not convert it to a double, a
          // slow path for 19-digit numbers (a fifth of the whole parse).
          if (start >= defer_from_) {
            deferred.emplace_back(static_cast<size_t>(start - base_), static_cast<size_t>(p_ - start));
          } else {
            char* w = const_cast<char*>(start);
            *w++ = '0';
            while (w < p_) *w++ = ' ';
          }
        }
        if (p_ == start && p_ < end_) ++p_;  // never stand still on a byte we cannot read
      }
      layout.largest = std::max(layout.largest, static_cast<size_t>(p_ - element_start));
      out.push_back(t);
    }
  }

  const char* base_;
  const char* p_;
  const char* end_;
  const char* stop_at_ = nullptr;
  const char* defer_from_ = reinterpret_cast<const char*>(UINTPTR_MAX);  // blanks from here on are deferred
  bool stopped_ = false;
  size_t elements_before_ = 0;
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
ScannedTimes scan_times(char* text, size_t size, size_t min_split = size_t{1} << 20);

}  // namespace torchneck::kineto::detail
