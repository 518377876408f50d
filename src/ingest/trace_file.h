// A trace file's text, gunzipped if it is gzip (libdeflate for one member
// of the size the trailer says; zlib otherwise, which also names damage),
// straight into one padded buffer of the final size (huge pages:
// core/big_memory.h), as simdjson reads it.
#pragma once

#include <string>

#include "core/big_memory.h"
#include "simdjson.h"

namespace torchneck::kineto::detail {

// Throws std::runtime_error "PATH: ..." (with "byte N" for damaged gzip).
// The text has SIMDJSON_PADDING zero bytes after it.
BigBytes read_trace_file(const std::string& path);

}  // namespace torchneck::kineto::detail
