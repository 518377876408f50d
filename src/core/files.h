// Files written whole or not at all.
#pragma once

#include <string>

namespace torchneck {

// Writes `data` to `path` atomically: a temporary file in the same folder,
// then rename, so a reader (or a crash) never sees half a file. Throws
// std::runtime_error with a one-line message ("cannot write PATH: why") and
// leaves no temporary file behind.
void write_file_atomically(const std::string& path, const std::string& data);

}  // namespace torchneck
