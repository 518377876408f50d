#include "ingest/trace_file.h"

#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace torchneck::kineto::detail {
namespace {

[[noreturn]] void gzip_error(const std::string& path, size_t at, int code) {
  throw std::runtime_error(path + ": byte " + std::to_string(at) + ": " +
                           (code == Z_BUF_ERROR ? std::string("the gzip data ends early (truncated)")
                                                : std::string("corrupt gzip data")));
}

bool is_gzip(const char* d, size_t n) {
  return n >= 2 && static_cast<unsigned char>(d[0]) == 0x1f && static_cast<unsigned char>(d[1]) == 0x8b;
}

// One allocation of the final size (the gzip trailer's ISIZE), no copy, so
// the peak memory is the JSON text once plus the parser's.
BigBytes gunzip(const std::string& path, const char* data, size_t n) {
  if (n < 18) gzip_error(path, n, Z_BUF_ERROR);
  const auto* t = reinterpret_cast<const unsigned char*>(data + n - 4);
  size_t size = static_cast<size_t>(t[0]) | static_cast<size_t>(t[1]) << 8 | static_cast<size_t>(t[2]) << 16 |
                static_cast<size_t>(t[3]) << 24;  // ISIZE: the size mod 2^32
  {  // libdeflate: a single gzip member of the size the trailer says, ~2x zlib's speed
    BigBytes out(size, simdjson::SIMDJSON_PADDING);
    libdeflate_decompressor* d = libdeflate_alloc_decompressor();
    size_t in_used = 0, produced = 0;
    const libdeflate_result r =
        d == nullptr ? LIBDEFLATE_BAD_DATA
                     : libdeflate_gzip_decompress_ex(d, data, n, out.data(), size, &in_used, &produced);
    if (d != nullptr) libdeflate_free_decompressor(d);
    if (r == LIBDEFLATE_SUCCESS && in_used == n && produced == size) return out;
    // Several members, a wrong ISIZE, or damage: zlib, which also says what is wrong.
  }
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw std::runtime_error(path + ": cannot start gzip decompression");
  std::string grown;  // only when ISIZE was wrong (several members, over 4 GiB)
  BigBytes out(size, simdjson::SIMDJSON_PADDING);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  z.avail_in = static_cast<uInt>(std::min<size_t>(n, UINT32_MAX));
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(std::min<size_t>(size, UINT32_MAX));
  int rc = Z_OK;
  while (true) {
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow (concatenated files): keep going.
      if (z.avail_in == 0) break;
      if (inflateReset(&z) != Z_OK) break;
      continue;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      inflateEnd(&z);
      gzip_error(path, z.total_in, rc == Z_DATA_ERROR ? Z_DATA_ERROR : rc);
    }
    if (z.avail_out == 0) {  // ISIZE was too small: continue in a growing string
      grown.append(out.data(), size - z.avail_out);
      const size_t have = grown.size();
      grown.resize(have + (1 << 20));
      z.next_out = reinterpret_cast<Bytef*>(grown.data() + have);
      z.avail_out = 1 << 20;
      size = 0;
      continue;
    }
    if (rc == Z_BUF_ERROR || z.avail_in == 0) {
      inflateEnd(&z);
      gzip_error(path, z.total_in, Z_BUF_ERROR);
    }
  }
  const size_t produced = z.total_out;
  inflateEnd(&z);
  if (!grown.empty()) {
    grown.resize(produced);
    return BigBytes(grown.data(), grown.size(), simdjson::SIMDJSON_PADDING);
  }
  if (produced == out.size()) return out;
  return BigBytes(out.data(), produced, simdjson::SIMDJSON_PADDING);
}

}  // namespace

BigBytes read_trace_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error(path + ": cannot open (" + std::strerror(errno) + ")");
  long len = -1;
  if (std::fseek(f, 0, SEEK_END) == 0) {
    len = std::ftell(f);
    if (std::fseek(f, 0, SEEK_SET) != 0) len = -1;
  }
  if (len > 0) {
    // Of a known size: read straight into one buffer (core/big_memory.h),
    // which is the text itself when not gzip.
    BigBytes raw(static_cast<size_t>(len), simdjson::SIMDJSON_PADDING);
    size_t at = 0, got = 0;
    while (at < raw.size() && (got = std::fread(raw.data() + at, 1, raw.size() - at, f)) > 0) at += got;
    const bool failed = std::ferror(f) != 0;
    char more = 0;
    const bool grew = !failed && std::fread(&more, 1, 1, f) == 1;
    std::fclose(f);
    if (failed) throw std::runtime_error(path + ": read error");
    if (grew)
      throw std::runtime_error(path + ": byte " + std::to_string(len) +
                               ": the file grew while it was read (is it still being written?)");
    if (at < raw.size()) raw = BigBytes(raw.data(), at, simdjson::SIMDJSON_PADDING);  // it shrank
    if (!is_gzip(raw.data(), raw.size())) return raw;
    return gunzip(path, raw.data(), raw.size());
  }
  // Of unknown size (a pipe, say): in pieces.
  std::string raw;
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) raw.append(buf, got);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) throw std::runtime_error(path + ": read error");
  if (!is_gzip(raw.data(), raw.size())) return BigBytes(raw.data(), raw.size(), simdjson::SIMDJSON_PADDING);
  return gunzip(path, raw.data(), raw.size());
}

}  // namespace torchneck::kineto::detail
