#include "model/run_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include "core/files.h"
#include "model/run_io_codec.h"

namespace torchneck {
namespace run_io_detail {

uint32_t block_checksum(uint32_t section, uint32_t block, uint32_t word, std::string_view payload) {
  const uint32_t head[3] = {section, block, word};
  uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(head), sizeof head);
  if (!payload.empty())
    crc = crc32(crc, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size()));
  return static_cast<uint32_t>(crc);
}

namespace {

// The length of the valid UTF-8 sequence at s[i], or 0 (RFC 3629's table).
size_t utf8_length_at(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // not overlong
    if (c == 0xed) hi = 0x9f;  // not a surrogate
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // not overlong
    if (c == 0xf4) hi = 0x8f;  // not past U+10FFFF
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) return 0;
  }
  return n;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0, n = 0; i < s.size(); i += n)
    if ((n = utf8_length_at(s, i)) == 0) return false;
  return true;
}

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_length_at(s, i);
    if (n == 0) {
      out += "\xef\xbf\xbd";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

void Writer::begin_section(uint32_t index) {
  section_ = index;
  blocks_ = 0;
  block_.assign(kBlockFrame, '\0');
}

void Writer::end_section() { emit_block(true); }

void Writer::bytes(std::string_view b) {
  while (!b.empty()) {
    const size_t take = std::min(b.size(), kBlockFrame + kMaxBlock - block_.size());
    block_.append(b.data(), take);
    b.remove_prefix(take);
    if (block_.size() == kBlockFrame + kMaxBlock) emit_block(false);
  }
}

void Writer::emit_block(bool last) {
  const std::string_view payload(block_.data() + kBlockFrame, block_.size() - kBlockFrame);
  const uint32_t word = static_cast<uint32_t>(payload.size()) | (last ? kLastBlock : 0);
  const uint32_t crc = block_checksum(section_, blocks_++, word, payload);
  std::memcpy(block_.data(), &word, sizeof word);
  std::memcpy(block_.data() + sizeof word, &crc, sizeof crc);
  sink_(block_);
  block_.resize(kBlockFrame);
}

bool Input::read(char* into, size_t n) {
  if (n > left()) return false;
  if (fd_ < 0) {
    if (n > 0) std::memcpy(into, bytes_.data() + pos_, n);
  } else {
    for (size_t got = 0; got < n;) {
      const ssize_t r = ::read(fd_, into + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
  }
  pos_ += n;
  return true;
}

void fail_at(uint64_t byte, const std::string& why) {
  throw std::runtime_error("byte " + std::to_string(byte) + ": " + why);
}

SectionBytes read_section(Input& in, uint32_t index, const char* name) {
  const std::string section = std::string("section '") + name + "'";
  const std::string unreadable = section + " could not be read (a read error, or the file changed as it was read)";
  SectionBytes s;
  for (uint32_t block = 0;; ++block) {
    const uint64_t at = in.pos();
    char frame[kBlockFrame];
    if (in.left() < kBlockFrame) fail_at(at, section + " is missing or cut short (the file ends early)");
    if (!in.read(frame, kBlockFrame)) fail_at(at, unreadable);
    uint32_t word = 0, crc = 0;
    std::memcpy(&word, frame, sizeof word);
    std::memcpy(&crc, frame + sizeof word, sizeof crc);
    const size_t n = word & ~kLastBlock;
    if (n > kMaxBlock) fail_at(at, section + " is damaged (a block length is out of range)");
    if (n > in.left()) fail_at(at, section + " is cut short or damaged (a block runs past the end of the file)");
    const size_t old = s.payload.size();
    s.blocks.emplace_back(old, in.pos());
    s.payload.resize(old + n);
    if (!in.read(s.payload.data() + old, n)) fail_at(at, unreadable);
    if (block_checksum(index, block, word, std::string_view(s.payload).substr(old)) != crc)
      fail_at(at, section + " is damaged (checksum mismatch)");
    if ((word & kLastBlock) != 0) return s;
  }
}

void Reader::fail_from(size_t pos, const std::string& why) const {
  // The block holding pos: the last one that starts at or before it.
  const auto after = std::upper_bound(s_.blocks.begin(), s_.blocks.end(), pos,
                                      [](size_t p, const std::pair<size_t, uint64_t>& b) { return p < b.first; });
  const uint64_t at = after == s_.blocks.begin() ? 0 : std::prev(after)->second + (pos - std::prev(after)->first);
  fail_at(at, std::string("section '") + name_ + "': " + why);
}

}  // namespace run_io_detail

namespace {

using namespace run_io_detail;  // NOLINT: the codec and the sections of run_io_sections.cc

constexpr char kMagic[8] = {'T', 'N', 'K', 'S', 'P', 'I', 'L', 'L'};
// The magic, the version and the CRC-32 of both.
constexpr size_t kHeaderBytes = sizeof kMagic + 2 * sizeof(uint32_t);

uint32_t header_checksum(uint32_t version) {
  uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(kMagic), sizeof kMagic);
  return static_cast<uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(&version), sizeof version));
}

std::string header() {
  std::string h(kMagic, sizeof kMagic);
  const uint32_t words[2] = {kSpillVersion, header_checksum(kSpillVersion)};
  h.append(reinterpret_cast<const char*>(words), sizeof words);
  return h;
}

// A version is named only when the header is whole: a damaged version byte
// is damage, not another format. Older formats had no header checksum.
void read_header(Input& in) {
  char h[kHeaderBytes];
  if (!in.read(h, sizeof h) || std::memcmp(h, kMagic, sizeof kMagic) != 0)
    fail_at(0, "not a torchneck spill file (no spill header)");
  uint32_t version = 0, crc = 0;
  std::memcpy(&version, h + sizeof kMagic, sizeof version);
  std::memcpy(&crc, h + sizeof kMagic + sizeof version, sizeof crc);
  const bool whole = crc == header_checksum(version);
  if (whole && version == kSpillVersion) return;
  if (whole || (version < kSpillVersion && crc != header_checksum(kSpillVersion))) {
    const std::string whose = version < kSpillVersion ? "an older torchneck's" : "a newer torchneck's";
    fail_at(sizeof kMagic, "spill format version " + std::to_string(version) + " (" + whose +
                               "); this torchneck reads version " + std::to_string(kSpillVersion));
  }
  fail_at(sizeof kMagic, "the header is damaged (checksum mismatch)");
}

void encode_into(const Writer::Sink& sink, const Run& run) {
  sink(header());
  Writer w(sink);
  encode_sections(w, run);
}

Run decode(Input& in) {
  read_header(in);
  Run run;
  decode_sections(in, run);
  if (in.left() != 0) fail_at(in.pos(), "unexpected bytes after the last section");
  return run;
}

}  // namespace

std::string encode_run(const Run& run) {
  std::string out;
  encode_into([&out](std::string_view piece) { out.append(piece); }, run);
  return out;
}

Run decode_run(const std::string& bytes) {
  Input in(bytes);
  return decode(in);
}

void save_run(const Run& run, const std::string& path) {
  write_file_atomically(path, [&run](const std::function<void(std::string_view)>& sink) { encode_into(sink, run); });
}

Run load_run(const std::string& path) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, &size);
  try {
    Input in(fd, size);
    Run run = decode(in);
    ::close(fd);
    return run;
  } catch (const std::runtime_error& e) {
    ::close(fd);
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace torchneck
