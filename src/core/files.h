// Files written whole or not at all.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace torchneck {

// Writes `data` to `path` atomically: a temporary file in the same folder,
// then rename, so a reader (or a crash) never sees half a file. Throws
// std::runtime_error with a one-line message ("cannot write PATH: why") and
// leaves no temporary file behind.
void write_file_atomically(const std::string& path, const std::string& data);

// The same for a file produced in pieces: `produce` is called with a sink
// that writes each piece as it comes, so the whole file is never in memory.
// Nothing is renamed into place unless every piece was written.
void write_file_atomically(const std::string& path,
                           const std::function<void(const std::function<void(std::string_view)>&)>& produce);

}  // namespace torchneck
