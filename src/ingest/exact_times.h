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
  // with a 0 of the same width (the buffer is ours: a padded copy).
  explicit TimeScanner(char* text, size_t size) : base_(text), p_(text), end_(text + size) {}

  EventsLayout layout;

  // Per element of the top-level "traceEvents" array, in order.
  std::vector<ExactTime> scan() {
    std::vector<ExactTime> out;
    ws();
    if (p_ >= end_ || *p_ != '{') return out;
    ++p_;
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
        layout.end = static_cast<size_t>(p_ - base_) - 1;
      } else {
        skip_value();
      }
      if (p_ == before) ++p_;
    }
    return out;
  }

 private:
  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  // At a '"': returns the raw content (escapes left as they are; keys we
  // look for have none) and moves past the closing quote.
  std::string_view string() {
    if (p_ >= end_ || *p_ != '"') return {};
    const char* start = ++p_;
    while (p_ < end_) {
      const char* q = static_cast<const char*>(std::memchr(p_, '"', static_cast<size_t>(end_ - p_)));
      if (q == nullptr) {
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
        const char c = *p_;
        if (c == '"') {
          string();
          continue;
        }
        ++p_;
        if (c == '{' || c == '[') ++depth;
        else if ((c == '}' || c == ']') && --depth == 0) return;
      }
      return;
    }
    while (p_ < end_ && *p_ != ',' && *p_ != '}' && *p_ != ']') ++p_;  // a number, true, false, null
  }
  void events(std::vector<ExactTime>& out) {
    bool expect_element = true;
    while (true) {
      ws();
      if (p_ >= end_ || *p_ == ']') {
        if (expect_element && layout.elements > 0) layout.well_separated = false;  // "...,]"
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
        if ((key == "ts" || key == "dur") && decimal_us_to_ns(start, p_, ns)) {
          (key == "ts" ? t.ts_ns : t.dur_ns) = ns;
          // Read here, exactly: the DOM need not convert it to a double, a
          // slow path for 19-digit numbers (a fifth of the whole parse).
          char* w = const_cast<char*>(start);
          *w++ = '0';
          while (w < p_) *w++ = ' ';
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
};

}  // namespace torchneck::kineto::detail
