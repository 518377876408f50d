// The Run model on disk: the spill file (DIR/profile.spill) that lets
// `torchneck report DIR` rebuild the full report after a run that could not
// write it (a fatal signal, kill -9), and that worker processes hand to the
// main process. A private binary format: magic, version and their checksum,
// then the run in named sections in a fixed order, each stored in blocks
// that carry a CRC-32 (run_io_codec.h), little-endian, lengths before contents.
//
// Loading never trusts the file: every block's checksum is verified before
// its bytes are read, and every length is checked against what is left, so
// a truncated or damaged spill is a one-line error naming the byte offset
// and the section, never a crash, a huge allocation or changed numbers.
#pragma once

#include <string>

#include "model/run.h"

namespace torchneck {

std::string encode_run(const Run& run);
// Throws std::runtime_error("byte N: ...") on a bad, damaged or truncated
// buffer.
Run decode_run(const std::string& bytes);

// File forms. save_run writes atomically (tmp + rename). load_run reads only
// a regular file (a FIFO or a device is refused before it is read), and no
// more of it than its size when opened. Both throw std::runtime_error with a
// one-line message naming the file.
void save_run(const Run& run, const std::string& path);
Run load_run(const std::string& path);

}  // namespace torchneck
