// printable_text: what a name from the user's script becomes before it
// reaches a terminal or report.txt. Every class of byte or code point it
// escapes, the text it must keep intact, and every code point of Unicode
// checked against an encoder of the test's own.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "report/printable.h"

namespace torchneck {
namespace {

// UTF-8 of one code point, written here from RFC 3629's table.
std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

std::string hex_escape(const char* prefix, uint32_t value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%s%0*x", prefix, digits, value);
  return buf;
}

TEST(PrintableText, PlainTextAndNewlinesAreKept) {
  const std::string text = "step 3: 12.5 ms (forward 40 %)\n  model.layers.0 [Linear] ~/train.py:12 {a|b} \\n`x`\n";
  EXPECT_EQ(printable_text(text), text);
  EXPECT_EQ(printable_text(""), "");
}

TEST(PrintableText, TerminalSequencesAreShownNotSent) {
  // GIVEN a name that clears the screen and one that retitles the terminal
  // (OSC 0, ended by BEL, or by ST: ESC \)
  EXPECT_EQ(printable_text("fn\x1b[2Jname"), "fn\\x1b[2Jname");
  EXPECT_EQ(printable_text("\x1b]0;pwned\x07tail"), "\\x1b]0;pwned\\x07tail");
  EXPECT_EQ(printable_text("\x1b]0;pwned\x1b\\"), "\\x1b]0;pwned\\x1b\\");
  // AND the single-byte CSI (C1 U+009B) and NEL (U+0085), as UTF-8
  EXPECT_EQ(printable_text("a\xc2\x9b" "2Jb"), "a\\u009b2Jb");
  EXPECT_EQ(printable_text("\xc2\x85"), "\\u0085");
  // AND the same C1 bytes raw (not UTF-8)
  EXPECT_EQ(printable_text("a\x9b" "2J"), "a\\x9b2J");
}

TEST(PrintableText, EveryC0ControlButNewlineAndDelAreEscaped) {
  for (int c = 0; c < 0x20; ++c) {
    const std::string in = std::string("<") + static_cast<char>(c) + ">";
    const std::string want = c == '\n' ? in : "<" + hex_escape("\\x", c, 2) + ">";
    EXPECT_EQ(printable_text(in), want) << "byte " << c;
  }
  EXPECT_EQ(printable_text("\x7f"), "\\x7f");
  EXPECT_EQ(printable_text("a\tb\rc"), "a\\x09b\\x0dc");
}

TEST(PrintableText, BidiControlsAreEscapedAndTheirNeighboursKept) {
  // GIVEN every control of the bidirectional algorithm
  for (uint32_t cp : {0x061cu, 0x200eu, 0x200fu, 0x202au, 0x202bu, 0x202cu, 0x202du, 0x202eu, 0x2066u, 0x2067u,
                      0x2068u, 0x2069u})
    EXPECT_EQ(printable_text("x" + utf8(cp) + "y"), "x" + hex_escape("\\u", cp, 4) + "y") << std::hex << cp;
  // THEN the code points next to them, which reorder nothing, are kept
  for (uint32_t cp : {0x061bu, 0x061du, 0x200du, 0x2029u, 0x202fu, 0x2065u, 0x206au})
    EXPECT_EQ(printable_text(utf8(cp)), utf8(cp)) << std::hex << cp;
  // AND a right-to-left override in an argument is shown, not obeyed
  EXPECT_EQ(printable_text("--name \xe2\x80\xaetxt.exe"), "--name \\u202etxt.exe");
}

TEST(PrintableText, MultiByteTextIsKeptIntact) {
  // GIVEN Latin, CJK, right-to-left letters, an emoji and an emoji sequence
  // joined by U+200D, the first and last code points of each length
  for (const std::string s : {"caf\xc3\xa9", "\xe4\xb8\xad\xe6\x96\x87", "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7",
                              "\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d", "\xf0\x9f\x98\x80",
                              "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb", "\xc2\xa0", "\xdf\xbf", "\xe0\xa0\x80",
                              "\xef\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"})
    EXPECT_EQ(printable_text("[" + s + "]"), "[" + s + "]") << s;
}

TEST(PrintableText, InvalidUtf8IsEscapedByteByByte) {
  EXPECT_EQ(printable_text("\xff"), "\\xff");
  EXPECT_EQ(printable_text("a\xfe\xf5z"), "a\\xfe\\xf5z");
  // truncated: at the end, and followed by a byte that does not continue it
  EXPECT_EQ(printable_text("\xe4\xb8"), "\\xe4\\xb8");
  EXPECT_EQ(printable_text("\xe4\xb8x"), "\\xe4\\xb8x");
  EXPECT_EQ(printable_text("\xf0\x9f\x98"), "\\xf0\\x9f\\x98");
  // a lone continuation byte
  EXPECT_EQ(printable_text("\x80"), "\\x80");
  // overlong forms of '/' and of U+0000
  EXPECT_EQ(printable_text("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(printable_text("\xc1\xbf"), "\\xc1\\xbf");
  EXPECT_EQ(printable_text("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");
  EXPECT_EQ(printable_text("\xf0\x80\x80\xaf"), "\\xf0\\x80\\x80\\xaf");
  EXPECT_EQ(printable_text("\xc0\x80"), "\\xc0\\x80");
  // surrogates (CESU-8), and beyond U+10FFFF
  EXPECT_EQ(printable_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(printable_text("\xed\xbf\xbf"), "\\xed\\xbf\\xbf");
  EXPECT_EQ(printable_text("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  // and a valid character right after an invalid byte survives
  EXPECT_EQ(printable_text("\xff\xc3\xa9"), "\\xff\xc3\xa9");
}

TEST(PrintableText, EveryCodePointIsKeptOrEscapedAsItsClassSays) {
  // GIVEN every Unicode scalar value, UTF-8 encoded by the test itself
  size_t kept = 0, escaped = 0;
  for (uint32_t cp = 0; cp <= 0x10ffff; ++cp) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const std::string in = utf8(cp);
    std::string want;
    if (cp == '\n' || (cp >= 0x20 && cp < 0x7f)) want = in;
    else if (cp < 0x20 || cp == 0x7f) want = hex_escape("\\x", cp, 2);
    else if (cp <= 0x9f || cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
             (cp >= 0x2066 && cp <= 0x2069))
      want = hex_escape("\\u", cp, 4);
    else want = in;
    const std::string got = printable_text(in);
    if (got != want) {
      ADD_FAILURE() << "U+" << std::hex << cp << ": got '" << got << "'";
      break;
    }
    (got == in ? kept : escaped) += 1;
  }
  // THEN the 32 C0 controls but '\n', DEL, the 32 C1 controls and the 12
  // bidi controls are escaped, and every other code point is kept
  EXPECT_EQ(escaped, 31u + 1 + 32 + 12);
  EXPECT_EQ(kept, 0x110000u - 0x800 - escaped);
}

}  // namespace
}  // namespace torchneck
