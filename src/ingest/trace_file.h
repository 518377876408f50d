// A trace file's text, gunzipped if it is gzip (libdeflate for one member
// of the size the trailer says; zlib otherwise, which also names damage),
// straight into simdjson's padded buffer: one allocation of the final size.
#pragma once

#include <string>

#include "simdjson.h"

namespace torchneck::kineto::detail {

// Throws std::runtime_error "PATH: ..." (with "byte N" for damaged gzip).
simdjson::padded_string read_trace_file(const std::string& path);

}  // namespace torchneck::kineto::detail
