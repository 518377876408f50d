#include "ingest/trace_file.h"

#include "core/files.h"

#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <system_error>

#include <sys/mman.h>
#include <sys/stat.h>

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

// The gzip trailer's ISIZE: the text's size mod 2^32.
size_t gzip_size(const char* data, size_t n) {
  const auto* t = reinterpret_cast<const unsigned char*>(data + n - 4);
  return static_cast<size_t>(t[0]) | static_cast<size_t>(t[1]) << 8 | static_cast<size_t>(t[2]) << 16 |
         static_cast<size_t>(t[3]) << 24;
}

// One gzip member of exactly `size` bytes into out, checksum checked; false
// on anything else. `step`: the output in pieces of that many bytes, each
// reported to `done` (what is there so far) as it is written.
bool isal_gunzip(const char* data, size_t n, char* out, size_t size, const std::function<bool(size_t)>* done,
                 size_t step = 0) {
  inflate_state st;
  isal_inflate_init(&st);
  st.crc_flag = ISAL_GZIP;
  st.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(data));
  size_t in_left = n, produced = 0;
  while (true) {
    const uint32_t in_now = static_cast<uint32_t>(std::min<size_t>(in_left, UINT32_MAX));
    if (st.avail_in == 0 && in_left > 0) {
      st.avail_in = in_now;
      in_left -= in_now;
    }
    const size_t piece = std::min<size_t>({step == 0 ? size - produced : step, size - produced, UINT32_MAX});
    st.next_out = reinterpret_cast<uint8_t*>(out + produced);
    st.avail_out = static_cast<uint32_t>(piece);
    if (isal_inflate(&st) != ISAL_DECOMP_OK) return false;
    produced += piece - st.avail_out;
    if (st.block_state == ISAL_BLOCK_FINISH) break;
    if (done != nullptr && !(*done)(produced)) return false;  // stopped
    if (produced == size && st.avail_out == 0) return false;  // more than the trailer said
    if (st.avail_in == 0 && in_left == 0 && st.avail_out > 0) return false;  // it ends early
  }
  return produced == size && st.avail_in == 0 && in_left == 0;  // nothing after the member
}

// One allocation of the final size (the gzip trailer's ISIZE), no copy, so
// the peak memory is the JSON text once plus the parser's.
BigBytes gunzip(const std::string& path, const char* data, size_t n) {
  if (n < 18) gzip_error(path, n, Z_BUF_ERROR);
  size_t size = gzip_size(data, n);
  {  // ISA-L: a single gzip member of the size the trailer says, ~3x zlib's speed
    BigBytes out(size, simdjson::SIMDJSON_PADDING);
    if (isal_gunzip(data, n, out.data(), size, nullptr)) return out;
    // Several members, a wrong ISIZE, or damage: zlib, which also says what is wrong.
  }
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw std::runtime_error(path + ": cannot start gzip decompression");
  BigBytes out(size, simdjson::SIMDJSON_PADDING);
  std::string grown;  // only when ISIZE was too small (several members, over 4 GiB)
  char* dst = out.data();
  size_t cap = size, written = 0, in_left = n;
  auto feed_out = [&] {
    z.next_out = reinterpret_cast<Bytef*>(dst + written);
    z.avail_out = static_cast<uInt>(std::min<size_t>(cap - written, UINT32_MAX));
  };
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  z.avail_in = 0;
  feed_out();
  while (true) {
    if (z.avail_in == 0 && in_left > 0) {
      z.avail_in = static_cast<uInt>(std::min<size_t>(in_left, UINT32_MAX));
      in_left -= z.avail_in;
    }
    const int rc = inflate(&z, Z_NO_FLUSH);
    written = static_cast<size_t>(reinterpret_cast<char*>(z.next_out) - dst);  // total_out restarts with each member
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow (concatenated files): keep going.
      if (z.avail_in == 0 && in_left == 0) break;
      if (inflateReset(&z) != Z_OK) break;
      continue;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      inflateEnd(&z);
      gzip_error(path, n - in_left - z.avail_in, rc == Z_DATA_ERROR ? Z_DATA_ERROR : rc);
    }
    if (z.avail_out == 0) {
      if (written == cap) {  // ISIZE was too small: on in a growing string
        if (grown.empty()) grown.assign(out.data(), written);
        grown.resize(written + (size_t{1} << 20));
        dst = grown.data();
        cap = grown.size();
      }
      feed_out();
      continue;
    }
    if (rc == Z_OK && (z.avail_in > 0 || in_left > 0)) continue;
    inflateEnd(&z);
    gzip_error(path, n - in_left - z.avail_in, Z_BUF_ERROR);  // it ends early
  }
  inflateEnd(&z);
  if (!grown.empty()) return BigBytes(grown.data(), written, simdjson::SIMDJSON_PADDING);
  if (written == out.size()) return out;
  return BigBytes(out.data(), written, simdjson::SIMDJSON_PADDING);
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
  bool ok = false;
  const std::string raw = read_rest(f, &ok);
  std::fclose(f);
  if (!ok) throw std::runtime_error(path + ": read error");
  if (!is_gzip(raw.data(), raw.size())) return BigBytes(raw.data(), raw.size(), simdjson::SIMDJSON_PADDING);
  return gunzip(path, raw.data(), raw.size());
}

std::unique_ptr<ArrivingText> ArrivingText::open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error(path + ": cannot open (" + std::strerror(errno) + ")");
  std::unique_ptr<ArrivingText> a(new ArrivingText());
  a->file_ = f;
  struct stat st {};
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return nullptr;
  const size_t len = static_cast<size_t>(st.st_size);
  char magic[2] = {0, 0};
  if (std::fread(magic, 1, 2, f) != 2) return nullptr;
  if (!is_gzip(magic, 2)) {
    std::rewind(f);
    a->text_ = BigBytes(len, simdjson::SIMDJSON_PADDING);
    return a->start([p = a.get()] { p->read_plain(); }) ? std::move(a) : nullptr;
  }
  // Compressed (a sixth of the text's size): mapped, not copied (no fresh
  // pages to fault in and clear), gunzipped there, unmapped when done.
  if (len < 18) return nullptr;
  void* m = mmap(nullptr, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fileno(f), 0);
  if (m == MAP_FAILED) return nullptr;
  a->gz_ = static_cast<const char*>(m);
  a->gz_size_ = len;
  const size_t size = gzip_size(a->gz_, len);
  if (size == 0) return nullptr;
  a->text_ = BigBytes(size, simdjson::SIMDJSON_PADDING);
  return a->start([p = a.get()] { p->inflate_gzip(); }) ? std::move(a) : nullptr;
}

bool ArrivingText::start(const std::function<void()>& work) {
  try {
    helper_ = std::thread(work);
    return true;
  } catch (const std::system_error&) {  // no thread: read at once instead
    return false;
  }
}

ArrivingText::~ArrivingText() {
  stop_.store(true, std::memory_order_relaxed);
  if (helper_.joinable()) helper_.join();
  unmap_gz();
  if (file_ != nullptr) std::fclose(file_);
}

void ArrivingText::unmap_gz() {
  if (gz_ != nullptr) munmap(const_cast<char*>(gz_), gz_size_);
  gz_ = nullptr;
}

void ArrivingText::publish(size_t bytes, bool done) {
  state_.store(bytes | (done ? kDone : 0), std::memory_order_release);
  state_.notify_all();
}

size_t ArrivingText::wait(size_t bytes) {
  uint64_t s = state_.load(std::memory_order_acquire);
  while ((s & ~kDone) < bytes && (s & kDone) == 0) {
    state_.wait(s, std::memory_order_acquire);
    s = state_.load(std::memory_order_acquire);
  }
  return static_cast<size_t>(s & ~kDone);
}

bool ArrivingText::finish() {
  if (helper_.joinable()) helper_.join();
  return whole_;
}

// Pieces of 256 KB: the first is there soon, and the scan follows closely.
constexpr size_t kPiece = size_t{1} << 18;

void ArrivingText::inflate_gzip() {
  size_t there = 0;
  try {
    const std::function<bool(size_t)> done = [&](size_t bytes) {
      there = bytes;
      publish(bytes, false);
      return !stop_.load(std::memory_order_relaxed);
    };
    whole_ = isal_gunzip(gz_, gz_size_, text_.data(), text_.size(), &done, kPiece);
  } catch (...) {
    whole_ = false;
  }
  unmap_gz();  // not needed any more: the peak memory is the text's
  publish(whole_ ? text_.size() : there, true);
}

void ArrivingText::read_plain() {
  size_t at = 0;
  try {
    size_t got = 0;
    while (at < text_.size() && !stop_.load(std::memory_order_relaxed) &&
           (got = std::fread(text_.data() + at, 1, std::min(kPiece, text_.size() - at), file_)) > 0) {
      at += got;
      publish(at, false);
    }
    char more = 0;
    whole_ = at == text_.size() && std::ferror(file_) == 0 && std::fread(&more, 1, 1, file_) == 0;
  } catch (...) {
    whole_ = false;
  }
  publish(at, true);
}

}  // namespace torchneck::kineto::detail
