// printf into a std::string, for the text reports.
#pragma once

#include <string>

namespace torchneck {

// Appends the formatted text to `out` (lines longer than 1 KiB are cut).
void appendf(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace torchneck
