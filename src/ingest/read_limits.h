// What reading a trace may hold. Its text (gunzipped) is held whole while it
// is read, so a text larger than memory, a gzip bomb or endless input must
// be refused early, with one line, instead of running the machine out of
// memory (trace_file.h checks the text as it arrives).
#pragma once

#include <cstddef>

namespace torchneck::kineto {

// Half of this machine's physical memory: the whole text is held while it
// is read, and the parser's tables come on top.
size_t default_max_text();

struct ReadLimits {
  // The largest text read, in bytes after gunzip (`--max-trace-size`).
  size_t max_text = default_max_text();
};

}  // namespace torchneck::kineto
