// The exact-time scanner (src/ingest/exact_times.h) against the one it
// replaced: the plain byte-by-byte scan below, kept as the oracle. Both must
// give the same times, the same layout of the events array, and leave the
// same bytes in the buffer, on every fixture and on damaged variants of them
// (quotes, backslashes, brackets planted anywhere, cut at any length).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "ingest/exact_times.h"
#include "ingest/trace_file.h"
#include "simdjson.h"

namespace torchneck::kineto {
namespace {

namespace fs = std::filesystem;

// The scanner as it was before the byte searches went 16 bytes at a time.
class ReferenceScanner {
 public:
  // Reads `text`, and overwrites each "ts"/"dur" number it reads exactly
  // with a 0 of the same width (the buffer is ours: a padded copy).
  explicit ReferenceScanner(char* text, size_t size) : base_(text), p_(text), end_(text + size) {}

  detail::EventsLayout layout;

  // Per element of the top-level "traceEvents" array, in order.
  std::vector<detail::ExactTime> scan() {
    std::vector<detail::ExactTime> out;
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
  void events(std::vector<detail::ExactTime>& out) {
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
      detail::ExactTime t;
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
        if (key == "ph" && p_ - start >= 3 && *start == '"' &&
            ((p_ - start == 3 && start[1] == 'X') || std::string_view(start, static_cast<size_t>(p_ - start)).find('\\') != std::string_view::npos))
          t.maybe_complete = true;  // "X", or escaped and perhaps "X"
        if ((key == "ts" || key == "dur") && detail::decimal_us_to_ns(start, p_, ns)) {
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


struct Scan {
  std::vector<detail::ExactTime> times;
  detail::EventsLayout layout;
  std::string text;  // after blanking
};

// scan_times: in two parts from a guessed element boundary (forced on any
// size with min_split 0), or one.
Scan scan_times_with(const std::string& text, bool* in_two = nullptr) {
  simdjson::padded_string buf(text);
  detail::ScannedTimes s = detail::scan_times(buf.data(), buf.size(), 0);
  if (in_two != nullptr) *in_two = s.in_two;
  Scan r;
  r.times = std::move(s.times);
  r.layout = std::move(s.layout);
  r.text.assign(buf.data(), buf.size());
  return r;
}

template <class S>
Scan scan_with(const std::string& text) {
  simdjson::padded_string buf(text);  // padded, like the real input
  S s(buf.data(), buf.size());
  Scan r;
  r.times = s.scan();
  r.layout = s.layout;
  r.text.assign(buf.data(), buf.size());
  return r;
}

void expect_equal(const Scan& a, const Scan& b, const std::string& what) {
  ASSERT_EQ(a.times.size(), b.times.size()) << what;
  for (size_t i = 0; i < a.times.size(); ++i) {
    ASSERT_EQ(a.times[i].ts_ns, b.times[i].ts_ns) << what << " element " << i;
    ASSERT_EQ(a.times[i].dur_ns, b.times[i].dur_ns) << what << " element " << i;
    ASSERT_EQ(a.times[i].maybe_complete, b.times[i].maybe_complete) << what << " element " << i;
  }
  ASSERT_EQ(a.layout.found, b.layout.found) << what;
  ASSERT_EQ(a.layout.begin, b.layout.begin) << what;
  ASSERT_EQ(a.layout.end, b.layout.end) << what;
  ASSERT_EQ(a.layout.commas, b.layout.commas) << what;
  ASSERT_EQ(a.layout.largest, b.layout.largest) << what;
  ASSERT_EQ(a.layout.elements, b.layout.elements) << what;
  ASSERT_EQ(a.layout.well_separated, b.layout.well_separated) << what;
  ASSERT_TRUE(a.text == b.text) << what;
}

void expect_same(const std::string& text, const std::string& what, bool two_parts = false, bool* in_two = nullptr) {
  const Scan a = two_parts ? scan_times_with(text, in_two) : scan_with<detail::TimeScanner>(text);
  expect_equal(a, scan_with<ReferenceScanner>(text), what);
}

std::vector<std::string> fixture_texts() {
  std::vector<std::string> out;
  const fs::path dir = fs::path(TORCHNECK_SOURCE_DIR) / ".." / "shared" / "fixtures" / "kineto";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(".trace.json") == std::string::npos) continue;
    const BigBytes t = detail::read_trace_file(e.path().string());
    out.emplace_back(t.data(), t.size());
  }
  return out;
}

TEST(IngestScanner, SameAsTheByteByByteScanOnEveryFixture) {
  const auto texts = fixture_texts();
  ASSERT_GE(texts.size(), 10u) << "fixtures not found";
  for (size_t i = 0; i < texts.size(); ++i) expect_same(texts[i], "fixture " + std::to_string(i));
}

bool valid_json(const std::string& text) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  return parser.parse(simdjson::padded_string(text)).get(root) == simdjson::SUCCESS;
}

// On text that is not JSON the scanner need not agree with the byte-by-byte
// scan (the whole-document parse rejects the text either way), but it must
// not make it valid (it blanks only whole numbers), and the layout it gives
// must lie inside the text: kineto_json.cc blanks the commas and parses the
// array's range when the layout says it is well separated.
void expect_safe(const std::string& text, const std::string& what, bool two_parts) {
  const Scan a = two_parts ? scan_times_with(text) : scan_with<detail::TimeScanner>(text);
  ASSERT_EQ(a.text.size(), text.size()) << what;
  ASSERT_FALSE(valid_json(a.text)) << what << ": the scan made invalid JSON valid";
  if (!a.layout.found || !a.layout.well_separated || a.layout.elements == 0) return;
  ASSERT_LT(a.layout.begin, a.layout.end) << what;
  ASSERT_LT(a.layout.end, text.size()) << what;
  size_t last = a.layout.begin;
  for (size_t c : a.layout.commas) {
    ASSERT_GT(c, last) << what;
    last = c;
  }
  ASSERT_LT(last, a.layout.end) << what;
}

// Exactly the byte-by-byte scan's result on valid JSON, safe on the rest.
// Returns whether the text was valid.
bool expect_same_or_safe(const std::string& text, const std::string& what, bool two_parts = false) {
  const bool valid = valid_json(text);
  if (valid) expect_same(text, what, two_parts);
  else expect_safe(text, what, two_parts);
  return valid;
}

// The text with every blank outside strings dropped (`extra` empty: a
// minified trace), or with `extra` added after every , : { [ outside strings.
std::string respaced(const std::string& text, const std::string& extra) {
  std::string out;
  out.reserve(text.size() * 2);
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      out += c;
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    out += c;
    if (c == '"') in_string = true;
    if (c == ',' || c == ':' || c == '{' || c == '[') out += extra;
  }
  return out;
}

TEST(IngestScanner, SameAsTheByteByByteScanOnDamagedText) {
  auto texts = fixture_texts();
  std::sort(texts.begin(), texts.end(), [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  texts.resize(std::min<size_t>(texts.size(), 4));  // the small ones: many variants each
  texts.push_back(R"({"traceEvents": [{"ph": "X", "name": "a\"}{[", "ts": 1.5, "dur": 2}, {"ts": "x\\", "dur": 3.25},)"
                  R"( {"args": {"ts": 9, "s": "}]\\\""}, "ts": 12345678901234567.891}]})");
  std::mt19937 rng(11);
  const char planted[] = {'"', '\\', '{', '}', '[', ']', ',', ':', ' ', '0', '.', '-', 'e'};
  size_t valid = 0, variants = 0;
  for (const std::string& base : texts) {
    for (int round = 0; round < 300; ++round) {
      std::string t = base;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < edits && !t.empty(); ++k) {
        const size_t at = rng() % t.size();
        const char c = planted[rng() % sizeof planted];
        switch (rng() % 3) {
          case 0: t[at] = c; break;
          case 1: t.insert(t.begin() + static_cast<long>(at), c); break;
          default: t.erase(at, 1 + rng() % 3); break;
        }
      }
      if (rng() % 4 == 0) t.resize(rng() % (t.size() + 1));  // cut anywhere
      valid += expect_same_or_safe(t, "variant " + std::to_string(round));
      expect_same_or_safe(t, "variant in two parts " + std::to_string(round), true);
      ++variants;
    }
  }
  // Some variants stay valid JSON (an edit inside a string, a digit): on
  // those the two scans must agree exactly.
  EXPECT_GE(valid, variants / 10) << "of " << variants;
  // Every prefix of a short document: ends inside strings, escapes, numbers.
  const std::string doc = texts.back();
  for (size_t n = 0; n <= doc.size(); ++n) {
    expect_same_or_safe(doc.substr(0, n), "prefix " + std::to_string(n));
    expect_same_or_safe(doc.substr(0, n), "prefix in two parts " + std::to_string(n), true);
  }
}

TEST(IngestScanner, SameAsTheByteByByteScanOnValidVariants) {
  // Minified, and with every kind of blank between all tokens: the fixtures
  // are pretty-printed.
  const auto texts = fixture_texts();
  for (size_t i = 0; i < texts.size(); ++i) {
    for (const std::string extra : {"", "\r\n\t ", " "}) {
      const std::string t = respaced(texts[i], extra);
      ASSERT_TRUE(valid_json(t)) << "fixture " << i;
      expect_same(t, "respaced fixture " + std::to_string(i) + " '" + extra + "'");
    }
  }
  // Escapes, quotes and brackets inside strings, and numbers, at every offset
  // from a 64-byte block boundary (the scanner reads 64 bytes at a time and
  // carries "inside a string" and "escaped" from block to block).
  const std::vector<std::string> tricky = {R"(\\)", R"(\")", R"(\\\")", R"(\\\\)", R"(}]{[,:)", R"(\"ts\":)", R"(\u0022)"};
  size_t n = 0;
  for (size_t pad = 0; pad < 130; ++pad) {
    for (const std::string& s : tricky) {
      const std::string name(pad, 'a');
      const std::string t = "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"" + name + s + "\", \"ts\": 1712195495505582.988, \"dur\": 2.5,"
                            " \"args\": {\"ts\": 7, \"x\": [\"" + s + "\", {\"dur\": 1}]}},\n{\"ph\":\"i\",\"" + name + s + "\": 1, \"dur\":" +
                            std::to_string(pad) + ", \"ts\":" + std::to_string(pad) + ".5}, [1, \"" + s + "\"], \"" + name + s + "\", 12 ],"
                            "\"" + name + s + "\": {\"traceEvents\": [{\"ts\": 3}]}, \"deviceProperties\": []}";
      ASSERT_TRUE(valid_json(t)) << t;
      expect_same(t, "tricky " + std::to_string(pad) + " " + s);
      expect_same(t, "tricky in two parts " + std::to_string(pad) + " " + s, true);
      ++n;
    }
  }
  EXPECT_EQ(n, 130u * tricky.size());
}

// Text that arrives in pieces of random sizes, as ArrivingText's helper
// thread writes it: the buffer holds bytes that would derail the scan
// ('"' and '\') until wait() copies the real ones in, so a scan that reads
// past what has arrived gives a different result. `limit`: no more than
// that many bytes ever arrive (a file that turns out damaged).
class Pieces final : public detail::TextArrival {
 public:
  Pieces(const std::string& text, char* buf, uint32_t seed, size_t limit = SIZE_MAX)
      : text_(text), buf_(buf), rng_(seed), limit_(std::min(limit, text.size())) {
    for (size_t i = 0; i < text.size(); ++i) buf_[i] = i % 3 == 0 ? '\\' : '"';
  }
  size_t wait(size_t bytes) override {
    while (there_ < bytes && there_ < limit_) {
      const size_t next = std::min(limit_, there_ + 1 + rng_() % 300);
      std::memcpy(buf_ + there_, text_.data() + there_, next - there_);
      there_ = next;
    }
    return there_;
  }
  bool finish() override { return wait(SIZE_MAX) == text_.size(); }

 private:
  const std::string& text_;
  char* buf_;
  std::mt19937 rng_;
  size_t limit_, there_ = 0;
};

Scan scan_arriving(const std::string& text, uint32_t seed, size_t limit = SIZE_MAX, bool* whole = nullptr) {
  simdjson::padded_string buf(text.size());
  Pieces pieces(text, buf.data(), seed, limit);
  detail::ScannedTimes s = detail::scan_times(buf.data(), buf.size(), 0, &pieces);
  const bool all = pieces.finish();
  if (whole != nullptr) *whole = all;
  Scan r;
  r.times = std::move(s.times);
  r.layout = std::move(s.layout);
  r.text.assign(buf.data(), buf.size());
  return r;
}

TEST(IngestScanner, TextArrivingInPiecesSameAsTheByteByByteScan) {
  std::vector<std::string> texts = fixture_texts();
  std::sort(texts.begin(), texts.end(), [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  texts.resize(std::min<size_t>(texts.size(), 6));
  for (const std::string extra : {"", "\r\n\t "}) texts.push_back(respaced(texts[0], extra));
  texts.push_back("  \n\t " + texts[1]);  // blanks before the first byte
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_TRUE(valid_json(texts[i])) << i;
    const Scan b = scan_with<ReferenceScanner>(texts[i]);
    for (uint32_t seed : {1u, 2u}) {
      bool whole = false;
      const Scan a = scan_arriving(texts[i], seed, SIZE_MAX, &whole);
      EXPECT_TRUE(whole);
      expect_equal(a, b, "text " + std::to_string(i) + " seed " + std::to_string(seed));
    }
  }
  // Text that stops arriving part of the way (damaged gzip): the scan ends
  // there, inside the bytes that came, and says it is not whole.
  for (size_t limit : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, texts[0].size() / 2, texts[0].size() - 1}) {
    bool whole = true;
    const Scan a = scan_arriving(texts[0], 3, limit, &whole);
    EXPECT_FALSE(whole) << limit;
    EXPECT_LE(a.layout.commas.empty() ? 0 : a.layout.commas.back(), limit) << limit;
  }
}

TEST(IngestScanner, TwoPartsSameAsTheByteByByteScanOnEveryFixture) {
  const auto texts = fixture_texts();
  size_t held = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    bool in_two = false;
    expect_same(texts[i], "fixture in two parts " + std::to_string(i), true, &in_two);
    held += in_two;
  }
  EXPECT_GE(held, 5u);  // the guess holds on the pretty-printed traces
  // A guess that cannot hold: the line after the middle starts an args
  // object's entry, not an event.
  const std::string nested = "{\"traceEvents\": [{\"ts\": 1, \"args\": {\"a\": [1,\n{\"ts\": 5}, 2,\n{\"ts\": 7}]}, \"dur\": 2},\n"
                             "{\"ts\": 3.5, \"dur\": 1}]}";
  bool in_two = true;
  expect_same(nested, "nested", true, &in_two);
  EXPECT_FALSE(in_two);
}

}  // namespace
}  // namespace torchneck::kineto
