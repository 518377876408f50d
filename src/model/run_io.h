// The Run model on disk: the spill file (DIR/profile.spill) that lets
// `torchneck report DIR` rebuild the full report after a run that could not
// write it (a fatal signal, kill -9), and that worker processes hand to the
// main process. A private binary format: magic, version, then every field of
// Run in a fixed order, little-endian, lengths before contents.
//
// Loading never trusts the file: every length is checked against what is
// left, so a truncated or corrupt spill is a one-line error naming the byte
// offset, never a crash or a huge allocation.
#pragma once

#include <string>

#include "model/run.h"

namespace torchneck {

std::string encode_run(const Run& run);
// Throws std::runtime_error("... at byte N") on a bad or truncated buffer.
Run decode_run(const std::string& bytes);

// File forms. save_run writes atomically (tmp + rename); both throw
// std::runtime_error with a one-line message naming the file.
void save_run(const Run& run, const std::string& path);
Run load_run(const std::string& path);

}  // namespace torchneck
