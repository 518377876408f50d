// A Kineto trace (or a folder of rank traces) as `torchneck analyze` would
// report it, in memory: its profile.json text, for `torchneck diff` to read
// like any run's (profile_view.h); no file is written.
#pragma once

#include <string>

namespace torchneck::compare {

// Throws std::runtime_error with one line when PATH holds no readable trace.
std::string profile_json_of_traces(const std::string& path);

}  // namespace torchneck::compare
