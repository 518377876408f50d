#include "report/pstats_writer.h"

#include <cstdint>
#include <cstring>

#include "core/clock.h"

namespace torchneck {
namespace {

// Python's marshal format, the subset pstats needs (Python/marshal.c).
class Marshal {
 public:
  std::string out;

  void i32(int32_t v) {
    const auto u = static_cast<uint32_t>(v);
    for (int s = 0; s < 32; s += 8) out += static_cast<char>((u >> s) & 0xff);
  }
  void integer(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      out += 'i';
      i32(static_cast<int32_t>(v));
      return;
    }
    // TYPE_LONG: sign-carrying digit count, then base-2^15 digits.
    out += 'l';
    uint64_t mag = v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
    std::string digits;
    int32_t n = 0;
    while (mag) {
      const auto d = static_cast<uint16_t>(mag & 0x7fff);
      digits += static_cast<char>(d & 0xff);
      digits += static_cast<char>(d >> 8);
      mag >>= 15;
      ++n;
    }
    i32(v < 0 ? -n : n);
    out += digits;
  }
  void real(double v) {
    out += 'g';
    char b[8];
    std::memcpy(b, &v, 8);  // little-endian host (x86_64, aarch64)
    out.append(b, 8);
  }
  void str(const std::string& s) {
    out += 'u';
    i32(static_cast<int32_t>(s.size()));
    out += s;
  }
  void tuple(int32_t n) {
    out += '(';
    i32(n);
  }
  void dict_begin() { out += '{'; }
  void dict_end() { out += '0'; }
};

void key(Marshal& m, const PyFunctionStats& f) {
  m.tuple(3);
  m.str(f.file);
  m.integer(f.line);
  m.str(f.function);
}

}  // namespace

std::string pstats_bytes(const Run& run) {
  Marshal m;
  m.dict_begin();
  for (const auto& f : run.python) {
    key(m, f);
    m.tuple(5);
    m.integer(static_cast<int64_t>(f.primitive_calls));
    m.integer(static_cast<int64_t>(f.calls));
    m.real(ns_to_s(f.self_ns));
    m.real(ns_to_s(f.total_ns));
    m.dict_begin();
    for (const auto& c : f.callers) {
      if (c.caller >= run.python.size()) continue;
      key(m, run.python[c.caller]);
      m.tuple(4);
      m.integer(static_cast<int64_t>(c.calls));
      m.integer(static_cast<int64_t>(c.primitive_calls));
      m.real(ns_to_s(c.self_ns));
      m.real(ns_to_s(c.total_ns));
    }
    m.dict_end();
  }
  m.dict_end();
  return m.out;
}

}  // namespace torchneck
