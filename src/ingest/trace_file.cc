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
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace torchneck::kineto {

size_t default_max_text() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return size_t{4} << 30;  // unknown: a laptop's half
  return static_cast<size_t>(pages) / 2 * static_cast<size_t>(page);
}

namespace detail {
namespace {

// Pieces of 256 KB: the first is there soon, the scan follows closely, and
// the bounds are checked that often.
constexpr size_t kPiece = size_t{1} << 18;
// A compressed file up to this size is read in whole when mapped (no page
// faults as it is gunzipped); a larger one page by page, so that a bomb
// stopped early has not been read in whole.
constexpr size_t kPopulateAtMost = size_t{16} << 20;

[[noreturn]] void gzip_error(const std::string& path, size_t at, int code) {
  throw std::runtime_error(path + ": byte " + std::to_string(at) + ": " +
                           (code == Z_BUF_ERROR ? std::string("the gzip data ends early (truncated)")
                                                : std::string("corrupt gzip data")));
}

[[noreturn]] void read_error(const std::string& path) {
  throw std::runtime_error(path + ": read error (" + std::strerror(errno) + ")");
}

bool is_gzip(const char* d, size_t n) {
  return n >= 2 && static_cast<unsigned char>(d[0]) == 0x1f && static_cast<unsigned char>(d[1]) == 0x8b;
}

bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// "512 MiB", "11.7 GiB", "300 bytes".
std::string shown_size(size_t bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, v == static_cast<double>(static_cast<size_t>(v)) ? "%.0f %s" : "%.1f %s", v,
                kUnits[unit]);
  return buf;
}

// The gzip trailer's ISIZE, from its last 4 bytes: the last member's text's
// size mod 2^32 (0 when `len` is too short for a trailer or it cannot be read).
size_t stated_size(int fd, size_t len) {
  unsigned char t[4] = {0, 0, 0, 0};
  if (len < 18 || ::pread(fd, t, 4, static_cast<off_t>(len - 4)) != 4) return 0;
  return static_cast<size_t>(t[0]) | static_cast<size_t>(t[1]) << 8 | static_cast<size_t>(t[2]) << 16 |
         static_cast<size_t>(t[3]) << 24;
}

// read(2) again when a signal interrupted it; -1 on an error.
ssize_t read_some(int fd, char* to, size_t n) {
  while (true) {
    const ssize_t got = ::read(fd, to, n);
    if (got >= 0 || errno != EINTR) return got;
  }
}

struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() { ::close(fd); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};


// One gzip member of exactly `size` bytes into out, checksum checked, in
// pieces of `step` bytes, each reported to piece(bytes there, bytes of
// `data` read) as it is written (false: stop); false on anything else.
bool isal_gunzip(const char* data, size_t n, char* out, size_t size, const std::function<bool(size_t, size_t)>& piece,
                 size_t step) {
  inflate_state st;
  isal_inflate_init(&st);
  st.crc_flag = ISAL_GZIP;
  st.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(data));
  size_t in_left = n, produced = 0;
  while (true) {
    if (st.avail_in == 0 && in_left > 0) {
      st.avail_in = static_cast<uint32_t>(std::min<size_t>(in_left, UINT32_MAX));
      in_left -= st.avail_in;
    }
    const size_t room = std::min<size_t>({step, size - produced, UINT32_MAX});
    st.next_out = reinterpret_cast<uint8_t*>(out + produced);
    st.avail_out = static_cast<uint32_t>(room);
    if (isal_inflate(&st) != ISAL_DECOMP_OK) return false;
    produced += room - st.avail_out;
    if (!piece(produced, n - in_left - st.avail_in)) return false;
    if (st.block_state == ISAL_BLOCK_FINISH) break;
    if (produced == size && st.avail_out == 0) return false;  // more than the trailer said
    if (st.avail_in == 0 && in_left == 0 && st.avail_out > 0) return false;  // it ends early
  }
  return produced == size && st.avail_in == 0 && in_left == 0;  // nothing after the member
}

// zlib, for any gzip (several members, any size) and to say where it is
// damaged: the file read 1 MiB at a time, the text into a buffer that grows
// (core/big_memory.h: remapped, not copied) up to one byte past the limit,
// held to `bounds` piece by piece.
BigBytes gunzip(const std::string& path, int fd, size_t len, TextBounds& bounds, size_t max_text) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw std::runtime_error(path + ": cannot start gzip decompression");
  struct End {
    z_stream& z;
    ~End() { inflateEnd(&z); }
  } end{z};
  std::vector<char> in(size_t{1} << 20);
  BigBytes out(std::min(max_text + 1, std::max(kBigMemoryMin, stated_size(fd, len))), simdjson::SIMDJSON_PADDING);
  size_t read = 0, written = 0;
  bool ended = false;  // a member's end was the last thing read
  while (true) {
    if (z.avail_in == 0) {
      const ssize_t got = read_some(fd, in.data(), in.size());
      if (got < 0) read_error(path);
      if (got == 0) break;
      read += static_cast<size_t>(got);
      z.next_in = reinterpret_cast<Bytef*>(in.data());
      z.avail_in = static_cast<uInt>(got);
    }
    if (ended) {  // another gzip member follows (concatenated files)
      if (inflateReset(&z) != Z_OK) gzip_error(path, read - z.avail_in, Z_DATA_ERROR);
      ended = false;
    }
    if (written == out.size()) out.resize(std::min(out.size() * 2, max_text + 1));
    z.next_out = reinterpret_cast<Bytef*>(out.data() + written);
    z.avail_out = static_cast<uInt>(std::min(kPiece, out.size() - written));
    const int rc = inflate(&z, Z_NO_FLUSH);
    written = static_cast<size_t>(reinterpret_cast<char*>(z.next_out) - out.data());
    if (!bounds.within(out.data(), written, read - z.avail_in)) throw std::runtime_error(bounds.refusal());
    if (rc == Z_STREAM_END) ended = true;
    else if (rc != Z_OK && rc != Z_BUF_ERROR) gzip_error(path, read - z.avail_in, Z_DATA_ERROR);
  }
  if (!ended) gzip_error(path, read, Z_BUF_ERROR);  // it ends early
  out.resize(written);
  return out;
}

// A text read as is: `len` bytes, as stat says (0: unknown, as a /proc
// file's: read to its end).
BigBytes read_as_is(const std::string& path, int fd, size_t len, TextBounds& bounds, size_t max_text) {
  if (len > max_text) throw std::runtime_error(bounds.too_large(false));
  BigBytes text(len > 0 ? len : kPiece, simdjson::SIMDJSON_PADDING);
  size_t at = 0;
  while (true) {
    if (at == text.size()) {
      if (len > 0) break;
      text.resize(std::min(text.size() * 2, max_text + 1));
    }
    const ssize_t got = read_some(fd, text.data() + at, std::min(kPiece, text.size() - at));
    if (got < 0) read_error(path);
    if (got == 0) break;
    at += static_cast<size_t>(got);
    if (!bounds.within(text.data(), at, 0)) throw std::runtime_error(bounds.refusal());
  }
  char more = 0;
  if (len > 0 && at == len && read_some(fd, &more, 1) == 1)
    throw std::runtime_error(path + ": byte " + std::to_string(len) +
                             ": the file grew while it was read (is it still being written?)");
  if (at < text.size()) text.resize(at);  // it shrank
  return text;
}

}  // namespace

std::string not_a_json_trace(const std::string& path, size_t at, char c) {
  char shown[16];
  if (c > ' ' && c < 0x7f) std::snprintf(shown, sizeof shown, "'%c'", c);
  else std::snprintf(shown, sizeof shown, "0x%02x", static_cast<unsigned char>(c));
  return path + ": byte " + std::to_string(at) + ": not a JSON trace (starts with " + shown + ")";
}

bool TextBounds::within(const char* text, size_t size, size_t gzip_read) {
  if (!refusal_.empty()) return false;
  for (; !opened_ && blanks_ < size; ++blanks_) {
    const char c = text[blanks_];
    if (is_blank(c)) continue;
    if (c != '{' && c != '[') return refuse(not_a_json_trace(path_, blanks_, c));
    opened_ = true;
    break;
  }
  if (size > max_text_) return refuse(too_large(gzip_read > 0));
  if (gzip_read > 0 && size > kRatioFrom && size / kMaxGzipRatio > gzip_read)
    return refuse(path_ + ": gunzips to over " + std::to_string(kMaxGzipRatio) + " times its size (" +
                  shown_size(size) + " from its first " + shown_size(gzip_read) +
                  "), where traces gzip 8 to 35 times: a decompression bomb? If it is a trace, gunzip it and "
                  "give the .json");
  return true;
}

std::string TextBounds::too_large(bool gunzipped) const {
  return path_ + ": the trace is larger than " + shown_size(max_text_) + (gunzipped ? " gunzipped" : "") +
         ", the limit of --max-trace-size (by default half of this machine's memory, as the whole text is held "
         "while it is read); --max-trace-size=SIZE raises it";
}

bool TextBounds::refuse(std::string why) {
  refusal_ = std::move(why);
  return false;
}

BigBytes read_trace_file(const std::string& path, const ReadLimits& limits) {
  uint64_t file_size = 0;
  const Fd f(open_regular_file(path, &file_size));
  const size_t len = static_cast<size_t>(file_size);
  TextBounds bounds(path, limits);
  char magic[2] = {0, 0};
  if (::pread(f.fd, magic, 2, 0) != 2 || !is_gzip(magic, 2))
    return read_as_is(path, f.fd, len, bounds, limits.max_text);
  // The last member's size, if the trailer tells the truth; if it does not,
  // the gzip is damaged: refused either way.
  if (stated_size(f.fd, len) > limits.max_text) throw std::runtime_error(bounds.too_large(true));
  return gunzip(path, f.fd, len, bounds, limits.max_text);
}

std::unique_ptr<ArrivingText> ArrivingText::open(const std::string& path, const ReadLimits& limits) {
  uint64_t file_size = 0;
  const int fd = open_regular_file(path, &file_size);
  std::unique_ptr<ArrivingText> a(new ArrivingText(path, limits));
  a->fd_ = fd;
  if (file_size == 0) return nullptr;
  const size_t len = static_cast<size_t>(file_size);
  char magic[2] = {0, 0};
  if (::pread(fd, magic, 2, 0) != 2) return nullptr;
  if (!is_gzip(magic, 2)) {
    if (len > limits.max_text) throw std::runtime_error(a->bounds_.too_large(false));
    a->text_ = BigBytes(len, simdjson::SIMDJSON_PADDING);
    return a->start([p = a.get()] { p->read_plain(); }) ? std::move(a) : nullptr;
  }
  const size_t size = stated_size(fd, len);
  if (size > limits.max_text) throw std::runtime_error(a->bounds_.too_large(true));
  // A size the bounds would refuse (or a trailer that lies): read_trace_file
  // reads it in pieces and says which bound it passes, if any.
  if (size == 0 || size > std::max(TextBounds::kRatioFrom, len * TextBounds::kMaxGzipRatio)) return nullptr;
  // Compressed (a sixth of the text's size): mapped, not copied (no fresh
  // pages to fault in and clear), gunzipped there, unmapped when done.
  void* m = mmap(nullptr, len, PROT_READ, MAP_PRIVATE | (len <= kPopulateAtMost ? MAP_POPULATE : 0), fd, 0);
  if (m == MAP_FAILED) return nullptr;
  a->gz_ = static_cast<const char*>(m);
  a->gz_size_ = len;
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
  if (fd_ >= 0) ::close(fd_);
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

void ArrivingText::inflate_gzip() {
  size_t there = 0;
  try {
    const std::function<bool(size_t, size_t)> piece = [&](size_t bytes, size_t gzip_read) {
      there = bytes;
      if (!bounds_.within(text_.data(), bytes, gzip_read)) return false;
      publish(bytes, false);
      return !stop_.load(std::memory_order_relaxed);
    };
    whole_ = isal_gunzip(gz_, gz_size_, text_.data(), text_.size(), piece, kPiece);
  } catch (...) {
    whole_ = false;
  }
  unmap_gz();  // not needed any more: the peak memory is the text's
  publish(whole_ ? text_.size() : there, true);
}

void ArrivingText::read_plain() {
  size_t at = 0;
  try {
    ssize_t got = 0;
    while (at < text_.size() && !stop_.load(std::memory_order_relaxed) &&
           (got = read_some(fd_, text_.data() + at, std::min(kPiece, text_.size() - at))) > 0) {
      at += static_cast<size_t>(got);
      if (!bounds_.within(text_.data(), at, 0)) break;
      publish(at, false);
    }
    char more = 0;
    whole_ = at == text_.size() && got >= 0 && bounds_.refusal().empty() && read_some(fd_, &more, 1) == 0;
  } catch (...) {
    whole_ = false;
  }
  publish(at, true);
}

}  // namespace detail
}  // namespace torchneck::kineto
