// Reads torch.profiler (Kineto) Chrome-trace files into kineto::Trace:
// `.json` and `.json.gz` (zlib), with simdjson's DOM parser (the events
// array as a stream of small documents, parse_many) and one scan of the
// text for the exact times. Old capitalised categories map to the current
// ones (kineto_trace.h).
//
// Never trusts the file: not a regular file, a gzip bomb, too large
// (ReadLimits), truncated, corrupt, empty, non-JSON, wrong-schema, deeply
// nested (beyond simdjson's depth limit) or out-of-range input is a
// std::runtime_error with one line, "PATH: byte N: what", never a crash, a
// hang or memory beyond the limits.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ingest/kineto_trace.h"
#include "ingest/read_limits.h"

namespace torchneck::kineto {

// `progress(done, total)` is called now and then with bytes parsed so far,
// for a progress bar; may be empty. Only a regular file is read, its text
// held to `limits` (and to trace_file.h's bounds) as it arrives.
Trace load_trace(const std::string& path,
                 const std::function<void(size_t, size_t)>& progress = {}, const ReadLimits& limits = {});

// Parses a trace held in memory (the text, not gzip); `path` names it in
// errors. The fuzz target's entry.
Trace parse_trace(const std::string& text, const std::string& path,
                  const std::function<void(size_t, size_t)>& progress = {});

// The trace files of a run: PATH itself, or every *.json / *.json.gz in the
// folder PATH (one per rank), sorted by name. Throws if there is none, or
// if PATH is neither a folder nor a regular file.
std::vector<std::string> trace_files(const std::string& path);

namespace detail {
// Traces with at least this many events read their events array on two
// threads (default: never; `torchneck analyze` with
// TORCHNECK_INGEST_THREADS=2 sets 8192); returns the previous value.
size_t set_parallel_min_events(size_t n);
// Texts of at least this many bytes are scanned for exact times in two
// parts on two threads (default: never; TORCHNECK_INGEST_THREADS=2 sets
// 1 MiB); returns the previous value.
size_t set_parallel_min_bytes(size_t n);
}  // namespace detail

}  // namespace torchneck::kineto
