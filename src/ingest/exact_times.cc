#include "ingest/exact_times.h"

#include <cstdint>

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


}  // namespace torchneck::kineto::detail
