#include "report/printable.h"

#include <cstdint>

namespace torchneck {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_byte_escape(std::string& out, unsigned char byte) {
  out += "\\x";
  out += kHex[byte >> 4];
  out += kHex[byte & 15];
}

void append_code_point_escape(std::string& out, uint32_t cp) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 15];
}

bool is_continuation(unsigned char byte) { return (byte & 0xc0) == 0x80; }

// The length of the valid UTF-8 sequence of two or more bytes at text[i],
// and its code point; 0 when the bytes there are not one (RFC 3629: no
// overlong form, no surrogate, nothing above U+10FFFF).
size_t multibyte_sequence(std::string_view text, size_t i, uint32_t& cp) {
  const auto lead = static_cast<unsigned char>(text[i]);
  size_t length = 0;
  uint32_t least = 0;  // below this, the code point has a shorter form (overlong)
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2, least = 0x80;
    cp = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3, least = 0x800;
    cp = lead & 0x0f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4, least = 0x10000;
    cp = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    const auto byte = static_cast<unsigned char>(text[i + k]);
    if (!is_continuation(byte)) return 0;
    cp = (cp << 6) | (byte & 0x3f);
  }
  if (cp < least || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return length;
}

bool is_c1_control(uint32_t cp) { return cp >= 0x80 && cp <= 0x9f; }

// The controls that reorder text around them (Unicode's bidirectional
// algorithm): marks, embeddings, overrides and isolates.
bool is_bidi_control(uint32_t cp) {
  return cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string printable_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if ((byte >= 0x20 && byte < 0x7f) || byte == '\n') {
      out += static_cast<char>(byte);
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t length = byte < 0x80 ? 0 : multibyte_sequence(text, i, cp);
    if (length == 0) {
      append_byte_escape(out, byte);  // a C0 control, DEL, or a byte that starts no valid sequence
      ++i;
    } else {
      if (is_c1_control(cp) || is_bidi_control(cp)) append_code_point_escape(out, cp);
      else out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

}  // namespace torchneck
