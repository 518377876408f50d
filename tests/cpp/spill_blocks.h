// The spill's framing as run_io.h and run_io_codec.h describe it, walked by
// the tests: a 16-byte header (magic, version, CRC-32 of both), then each
// section in blocks (a length word, a checksum, the payload).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "model/run_io_codec.h"

namespace torchneck::test_support {

constexpr size_t kSpillHeaderBytes = 16;

struct SpillBlock {
  size_t at;  // its frame's first byte
  uint32_t section;
  uint32_t index;  // within its section
  size_t payload_bytes;
};

inline std::vector<SpillBlock> spill_blocks(const std::string& bytes) {
  std::vector<SpillBlock> out;
  uint32_t section = 0, index = 0;
  for (size_t at = kSpillHeaderBytes; at + run_io_detail::kBlockFrame <= bytes.size();) {
    uint32_t word = 0;
    std::memcpy(&word, bytes.data() + at, sizeof word);
    out.push_back({at, section, index, word & ~run_io_detail::kLastBlock});
    at += run_io_detail::kBlockFrame + out.back().payload_bytes;
    const bool last = (word & run_io_detail::kLastBlock) != 0;
    section += last ? 1 : 0;
    index = last ? 0 : index + 1;
  }
  return out;
}

// BYTES with every block's checksum made right again: damage that gets past
// the checksums, for the checks behind them.
inline std::string resealed(std::string bytes) {
  for (const SpillBlock& b : spill_blocks(bytes)) {
    uint32_t word = 0;
    std::memcpy(&word, bytes.data() + b.at, sizeof word);
    const std::string_view payload = std::string_view(bytes).substr(b.at + run_io_detail::kBlockFrame, b.payload_bytes);
    const uint32_t crc = run_io_detail::block_checksum(b.section, b.index, word, payload);
    std::memcpy(bytes.data() + b.at + sizeof word, &crc, sizeof crc);
  }
  return bytes;
}

}  // namespace torchneck::test_support
