#include "ingest/exact_times.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

namespace {

// Per 64-byte block: bit i for byte i.
struct Masks {
  uint64_t quote, backslash, open, close, separator;  // open: { [  close: } ]  separator: , :
};

#if defined(__SSE2__)
inline Masks classify(const char* p) {
  const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\'), open = _mm_set1_epi8('{'),
                close = _mm_set1_epi8('}'), comma = _mm_set1_epi8(','), colon = _mm_set1_epi8(':'),
                lower = _mm_set1_epi8(0x20);
  Masks m{0, 0, 0, 0, 0};
  for (int k = 0; k < 4; ++k) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    const __m128i folded = _mm_or_si128(v, lower);  // '[' -> '{', ']' -> '}'
    const auto bits = [&](__m128i x) { return static_cast<uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(x))) << (16 * k); };
    m.quote |= bits(_mm_cmpeq_epi8(v, quote));
    m.backslash |= bits(_mm_cmpeq_epi8(v, slash));
    m.open |= bits(_mm_cmpeq_epi8(folded, open));
    m.close |= bits(_mm_cmpeq_epi8(folded, close));
    m.separator |= bits(_mm_or_si128(_mm_cmpeq_epi8(v, comma), _mm_cmpeq_epi8(v, colon)));
  }
  return m;
}
#else
inline Masks classify(const char* p) {
  Masks m{0, 0, 0, 0, 0};
  for (int i = 0; i < 64; ++i) {
    const uint64_t bit = uint64_t{1} << i;
    switch (p[i]) {
      case '"': m.quote |= bit; break;
      case '\\': m.backslash |= bit; break;
      case '{': case '[': m.open |= bit; break;
      case '}': case ']': m.close |= bit; break;
      case ',': case ':': m.separator |= bit; break;
      default: break;
    }
  }
  return m;
}
#endif

// The bytes escaped by a backslash (the byte after an odd run of them);
// `carry`: the block before ended in a backslash that escapes this block's
// first byte. Backslashes are rare in traces: one at a time.
inline uint64_t escaped_bytes(uint64_t backslash, bool& carry) {
  uint64_t escaped = 0;
  if (carry) {
    escaped = 1;
    backslash &= ~uint64_t{1};  // an escaped backslash escapes nothing
    carry = false;
  }
  while (backslash != 0) {
    const int i = __builtin_ctzll(backslash);
    if (i == 63) {
      carry = true;
      break;
    }
    escaped |= uint64_t{2} << i;
    backslash &= ~(uint64_t{3} << i);
  }
  return escaped;
}

// Bit i: an odd number of bits at or below i are set (the bytes from an
// opening quote up to, not with, its closing one).
inline uint64_t prefix_xor(uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}

inline bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

std::vector<ExactTime> TimeScanner::scan() {
  std::vector<ExactTime> out;
  reserve(out, static_cast<size_t>(end_ - base_));
  const char* p = base_;
  for (size_t have = 0; p < end_;) {  // the first byte that is not a blank (as it arrives)
    if (p == base_ + have) {
      const size_t want = std::min(have + 64, static_cast<size_t>(end_ - base_));
      have = arriving_ != nullptr ? arriving_->wait(want) : want;
      if (have < want) return out;
    }
    if (!blank(*p)) break;
    ++p;
  }
  if (p >= end_ || *p != '{') return out;
  mode_ = Mode::kTop;
  walk(p + 1, out);
  return out;
}

std::vector<ExactTime> TimeScanner::scan_from(const char* at, size_t before) {
  std::vector<ExactTime> out;
  reserve(out, static_cast<size_t>(end_ - at));
  deferred.reserve(static_cast<size_t>(end_ - at) / 48);
  layout.found = true;
  elements_before_ = before;
  defer_from_ = base_;
  mode_ = Mode::kEvents;
  expect_element_ = true;
  separator_ = at - 1;
  walk(at, out);
  return out;
}

void TimeScanner::walk(const char* from, std::vector<ExactTime>& out) {
  bool escape_carry = false;
  uint64_t in_string = 0;  // all ones: the block before ended inside a string
  alignas(16) char tail[64];
  const char* there = arriving_ != nullptr ? base_ : end_;  // what has arrived
  for (const char* p = from; p < end_; p += 64) {
    if (p + 64 > there && there < end_) {
      const size_t want = std::min(static_cast<size_t>(p + 64 - base_), static_cast<size_t>(end_ - base_));
      const size_t have = arriving_->wait(want);
      if (have < want) return;  // it will not: the caller reads the file again
      there = base_ + have;
    }
    const char* block = p;
    if (end_ - p < 64) {  // the last bytes, padded with blanks: nothing read past the end
      const size_t n = static_cast<size_t>(end_ - p);
      std::memcpy(tail, p, n);
      std::memset(tail + n, ' ', 64 - n);
      block = tail;
    }
    const Masks m = classify(block);
    const uint64_t escaped = (m.backslash | static_cast<uint64_t>(escape_carry)) != 0 ? escaped_bytes(m.backslash, escape_carry) : 0;
    const uint64_t inside = prefix_xor(m.quote & ~escaped) ^ in_string;
    in_string = static_cast<uint64_t>(static_cast<int64_t>(inside) >> 63);
    const uint64_t brackets = (m.open | m.close) & ~inside;
    const uint64_t all = brackets | (m.separator & ~inside);
    uint64_t bits = mode_ == Mode::kSkip ? brackets : all;
    while (bits != 0) {
      const int i = __builtin_ctzll(bits);
      if (!step(p + i, out)) return;
      const uint64_t above = i == 63 ? 0 : ~uint64_t{0} << (i + 1);
      bits = (mode_ == Mode::kSkip ? brackets : all) & above;
    }
  }
  // The text ended inside the events array: not JSON (the whole-document
  // parse will say where).
  if (layout.found && !events_closed_) {
    layout.end = static_cast<size_t>(end_ - base_) - (end_ > base_ ? 1 : 0);
    layout.well_separated = false;
  }
}

inline bool TimeScanner::step(const char* p, std::vector<ExactTime>& out) {
  const char c = *p;
  switch (mode_) {
    case Mode::kSkip:
      if (c == '{' || c == '[') {
        ++skip_depth_;
      } else if (--skip_depth_ == 0) {
        mode_ = skip_return_;
        if (mode_ == Mode::kEvents) element_done(p, out);  // an array in the events array
      }
      return true;
    case Mode::kElement:
      if (c == ':') {
        key_ = key_at(p);
        value_ = p + 1;
      } else if (c == ',' || c == '}') {
        if (key_ != kNone) value(p);
        key_ = kNone;
        if (c == '}') {
          element_done(p, out);
          mode_ = Mode::kEvents;
        }
      } else if (c == '{' || c == '[') {
        mode_ = Mode::kSkip;
        skip_return_ = Mode::kElement;
        skip_depth_ = 1;
      } else {
        layout.well_separated = false;  // ']' in an object
      }
      return true;
    case Mode::kEvents:
      if (c == '{' || c == '[') {
        if (p == stop_at_ && expect_element_) {
          stopped_ = true;
          return false;
        }
        if (!expect_element_) layout.well_separated = false;  // "}{": no comma
        expect_element_ = false;
        ++layout.elements;
        element_ = p;
        current_ = ExactTime();
        if (c == '{') {
          mode_ = Mode::kElement;
          key_ = kNone;
        } else {
          mode_ = Mode::kSkip;
          skip_return_ = Mode::kEvents;
          skip_depth_ = 1;
        }
      } else if (c == ',') {
        if (expect_element_ && !scalar_element(p, out)) layout.well_separated = false;  // "[," or ",,"
        layout.commas.push_back(static_cast<size_t>(p - base_));
        expect_element_ = true;
        separator_ = p;
      } else if (c == ']') {
        if (expect_element_ && !scalar_element(p, out) && layout.elements + elements_before_ > 0)
          layout.well_separated = false;  // "...,]"
        layout.end = static_cast<size_t>(p - base_);
        events_closed_ = true;
        mode_ = Mode::kTop;
      } else {
        layout.well_separated = false;  // ':' or '}' in the array
      }
      return true;
    case Mode::kTop:
      if (c == ':') {
        events_colon_ = !layout.found && key_is(p, "traceEvents") ? p : nullptr;
        return true;
      }
      if (c == '[' && events_colon_ != nullptr && skip_ws(events_colon_ + 1) == p) {
        layout.found = true;
        layout.begin = static_cast<size_t>(p - base_);
        events_colon_ = nullptr;
        mode_ = Mode::kEvents;
        expect_element_ = true;
        separator_ = p;
      } else if (c == '{' || c == '[') {
        mode_ = Mode::kSkip;
        skip_return_ = Mode::kTop;
        skip_depth_ = 1;
      } else if (c == '}') {
        mode_ = Mode::kDone;  // the end of the top-level object: what follows is not read
        return false;
      }
      events_colon_ = nullptr;
      return true;
    case Mode::kDone:
      return false;
  }
  return false;
}

inline bool TimeScanner::real_quote(const char* q) const {
  size_t slashes = 0;
  for (const char* b = q - 1; b >= base_ && *b == '\\'; --b) ++slashes;
  return slashes % 2 == 0;
}

bool TimeScanner::key_is(const char* colon, std::string_view key) const {
  const char* q = colon;  // just past the key's closing quote
  while (q > base_ && blank(q[-1])) --q;
  const size_t n = key.size();
  if (static_cast<size_t>(q - base_) < n + 2 || q[-1] != '"') return false;
  const char* open = q - static_cast<std::ptrdiff_t>(n) - 2;
  return *open == '"' && std::memcmp(open + 1, key.data(), n) == 0 && real_quote(open);
}

inline TimeScanner::Key TimeScanner::key_at(const char* colon) const {
  const char* q = colon;
  while (q > base_ && blank(q[-1])) --q;
  if (q - base_ < 4 || q[-1] != '"') return kNone;
  if (q[-4] == '"') {  // two letters
    if (q[-3] == 't' && q[-2] == 's') return real_quote(q - 4) ? kTs : kNone;
    if (q[-3] == 'p' && q[-2] == 'h') return real_quote(q - 4) ? kPh : kNone;
    return kNone;
  }
  if (q - base_ >= 5 && q[-5] == '"' && q[-4] == 'd' && q[-3] == 'u' && q[-2] == 'r') return real_quote(q - 5) ? kDur : kNone;
  return kNone;
}

void TimeScanner::value(const char* end) {
  const char* start = skip_ws(value_);
  if (start >= end) return;
  if (key_ == kPh) {
    const char* e = end;
    while (e > start && blank(e[-1])) --e;
    const size_t n = static_cast<size_t>(e - start);
    if (n >= 3 && *start == '"' && ((n == 3 && start[1] == 'X' && start[2] == '"') || std::memchr(start, '\\', n) != nullptr))
      current_.maybe_complete = true;  // "X", or escaped and perhaps "X"
    return;
  }
  int64_t ns = 0;
  if (!decimal_us_to_ns(start, end, ns)) return;
  (key_ == kTs ? current_.ts_ns : current_.dur_ns) = ns;
  // Read here, exactly: the DOM need not convert it to a double, a slow
  // path for 19-digit numbers (a fifth of the whole parse).
  if (start >= defer_from_) {
    deferred.emplace_back(static_cast<size_t>(start - base_), static_cast<size_t>(end - start));
  } else {
    char* w = const_cast<char*>(start);
    *w = '0';
    std::memset(w + 1, ' ', static_cast<size_t>(end - start) - 1);
  }
}

inline void TimeScanner::element_done(const char* last, std::vector<ExactTime>& out) {
  layout.largest = std::max(layout.largest, static_cast<size_t>(last + 1 - element_));
  out.push_back(current_);
}

bool TimeScanner::scalar_element(const char* p, std::vector<ExactTime>& out) {
  const char* s = skip_ws(separator_ + 1);
  if (s >= p) return false;
  ++layout.elements;
  expect_element_ = false;
  const char* e = p;  // a number or literal runs to the separator; a string to its closing quote
  if (*s == '"')
    while (e > s && blank(e[-1])) --e;
  layout.largest = std::max(layout.largest, static_cast<size_t>(e - s));
  out.push_back(ExactTime());
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

ScannedTimes scan_times(char* text, size_t size, size_t min_split, TextArrival* arriving) {
  ScannedTimes r;
  const char* at = size >= min_split && arriving == nullptr ? guess_element_start(text, size) : nullptr;
  if (at == nullptr) {
    TimeScanner s(text, size);
    s.arriving(arriving);
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
