#include "ingest/exact_times.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>

namespace torchneck::kineto::detail {

// "1712195495505582.988" (microseconds) -> 1712195495505582988; false when
// the text is not a plain decimal (exponent, too long): the caller keeps
// the double's value.
bool decimal_us_to_ns(const char* p, const char* end, int64_t& out) {
  // Only a valid JSON number is read (the caller blanks what it reads, and
  // must not turn invalid JSON into valid): -?(0|[1-9][0-9]*)(.[0-9]+)?
  bool neg = false;
  if (p < end && *p == '-') {
    neg = true;
    ++p;
  }
  if (p >= end || *p < '0' || *p > '9') return false;
  if (*p == '0' && p + 1 < end && p[1] >= '0' && p[1] <= '9') return false;  // leading zero
  int64_t whole = 0;
  for (; p < end && *p >= '0' && *p <= '9'; ++p) {
    whole = whole * 10 + (*p - '0');
    if (whole > INT64_MAX / 1000 - 1) return false;  // ns would not fit in 64 bits
  }
  int64_t frac = 0;
  int scale = 100;
  if (p < end && *p == '.') {
    ++p;
    if (p >= end || *p < '0' || *p > '9') return false;  // "1." is not JSON
    for (; p < end && *p >= '0' && *p <= '9'; ++p) {
      if (scale >= 1) frac += (*p - '0') * scale;
      scale /= 10;
    }
  }
  while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
  if (p != end) return false;  // an exponent, or not a number at all
  const int64_t ns = whole * 1000 + frac;
  out = neg ? -ns : ns;
  return true;
}

// Where the second part may start: a '{' that begins a line (after blanks)
// whose previous line ends in ',' -- in a pretty-printed Kineto trace, the
// start of an event. A newline is never inside a valid JSON string; anything
// else is caught by the first part's scan not arriving there.
static const char* guess_element_start(const char* text, size_t size) {
  const char* end = text + size;
  const char* p = text + size / 2;
  const char* limit = std::min(end, p + (size_t{1} << 20));
  while (p < limit) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(limit - p)));
    if (nl == nullptr) return nullptr;
    const char* q = nl + 1;
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\r')) ++q;
    const char* b = nl;
    while (b > text && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r')) --b;
    if (q < end && *q == '{' && b > text && b[-1] == ',') return q;
    p = nl + 1;
  }
  return nullptr;
}

ScannedTimes scan_times(char* text, size_t size, size_t min_split) {
  ScannedTimes r;
  const char* at = size >= min_split ? guess_element_start(text, size) : nullptr;
  if (at == nullptr) {
    TimeScanner s(text, size);
    r.times = s.scan();
    r.layout = std::move(s.layout);
    return r;
  }
  TimeScanner first(text, size), second(text, size);
  std::vector<ExactTime> later;
  std::thread worker;
  try {
    worker = std::thread([&] { later = second.scan_from(at, 1); });
  } catch (...) {  // no thread: one scan (nothing was touched yet)
    r.times = first.scan();
    r.layout = std::move(first.layout);
    return r;
  }
  first.stop_at(at);
  r.times = first.scan();
  worker.join();
  if (first.stopped()) {
    // The guess held: the second part is what the first would have read.
    r.in_two = true;
    second.blank_deferred(text);
    r.times.insert(r.times.end(), later.begin(), later.end());
    r.layout = std::move(first.layout);
    r.layout.end = second.layout.end;
    r.layout.commas.insert(r.layout.commas.end(), second.layout.commas.begin(), second.layout.commas.end());
    r.layout.largest = std::max(r.layout.largest, second.layout.largest);
    r.layout.elements += second.layout.elements;
    r.layout.well_separated = r.layout.well_separated && second.layout.well_separated;
    return r;
  }
  // The first scan went past `at`: it read everything, and what it would
  // have blanked there is blanked now that the second scan is done reading.
  first.blank_deferred(text);
  r.layout = std::move(first.layout);
  return r;
}

}  // namespace torchneck::kineto::detail
