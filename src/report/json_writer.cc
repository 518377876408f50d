#include "report/json_writer.h"

#include <cmath>
#include <cstdio>

namespace torchneck {

namespace {

// Bytes that need more than copying: quotes, backslash, control characters,
// "<", ">", "&" (HTML safety) and every non-ASCII byte (UTF-8 checked).
struct Plain {
  bool table[256];
  constexpr Plain() : table() {
    for (int c = 0; c < 256; ++c)
      table[c] = c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&';
  }
};
constexpr Plain kPlain;

}  // namespace

bool is_json_plain(std::string_view s) {
  for (char c : s)
    if (!kPlain.table[static_cast<unsigned char>(c)]) return false;
  return true;
}

void append_json_escaped(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  size_t i = 0;
  while (i < s.size()) {
    // Runs of plain bytes are appended whole (most names are all plain).
    size_t j = i;
    while (j < s.size() && kPlain.table[static_cast<unsigned char>(s[j])]) ++j;
    if (j > i) out.append(s.data() + i, j - i);
    if (j == s.size()) return;
    i = j;
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          // Pass valid UTF-8 through; replace invalid bytes with U+FFFD so
          // the output always parses.
          size_t len = (c >= 0xf0 && c < 0xf8) ? 4 : (c >= 0xe0) ? 3 : (c >= 0xc2 && c < 0xe0) ? 2 : 0;
          bool ok = len > 0 && i + len <= s.size();
          for (size_t k = 1; ok && k < len; ++k)
            ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
          if (ok) {
            out.append(s.substr(i, len));
            i += len - 1;
          } else {
            out += "\\ufffd";
          }
        }
    }
    ++i;
  }
}

void JsonWriter::newline() {
  if (indent_ <= 0) return;
  out_ += '\n';
  out_.append(counts_.size() * static_cast<size_t>(indent_), ' ');
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!counts_.empty()) {
    if (counts_.back()++ > 0) out_ += ',';
    newline();
  }
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  counts_.push_back(0);
  return *this;
}

JsonWriter& JsonWriter::close(char bracket) {
  const bool empty = counts_.back() == 0;
  counts_.pop_back();
  if (!empty) newline();
  out_ += bracket;
  return *this;
}

JsonWriter& JsonWriter::end_object() { return close('}'); }

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  counts_.push_back(0);
  return *this;
}

JsonWriter& JsonWriter::end_array() { return close(']'); }

JsonWriter& JsonWriter::key(std::string_view k) {
  before_value();
  out_ += '"';
  append_json_escaped(out_, k);
  out_ += indent_ > 0 ? "\": " : "\":";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  before_value();
  out_ += '"';
  append_json_escaped(out_, s);
  out_ += '"';
  return *this;
}

JsonWriter& JsonWriter::value(int64_t v) {
  before_value();
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t v) {
  before_value();
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  before_value();
  if (!std::isfinite(v)) {
    out_ += "null";
    return *this;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  out_ += buf;
  return *this;
}

JsonWriter& JsonWriter::value(bool v) {
  before_value();
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_ += "null";
  return *this;
}

}  // namespace torchneck
