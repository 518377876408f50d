// The front door from sources to files: a command names its source
// (pipeline/sources.h) and its options, and gets the terminal report back
// with every file of its output folder written:
//
//   source (sources.h) -> analyse (analyse.h) -> writers (writers.h) + report.txt
//
// bindings/, tools/ and compare/ reach the analysis and the ingest only
// through here.
#pragma once

#include <string>

#include "pipeline/analyse.h"
#include "pipeline/options.h"
#include "pipeline/sources.h"

namespace torchneck {

// SOURCE analysed, and OPTIONS.dir's files written (none when it is
// empty). Returns the terminal report, whose "Files" section names only the
// files that were written and says which could not be and why. Every file
// is tried, whatever failed before it. When one cannot be written: with
// ERROR, sets it to a one-line message and still returns the text (the
// user sees the report even on a full disk); without, throws
// std::runtime_error with that message.
std::string report(Source& source, const PipelineOptions& options, std::string* error = nullptr);

// SOURCE's profile.json text, and no file (`torchneck diff` of traces).
std::string profile_json_text(Source& source, const PipelineOptions& options);

}  // namespace torchneck
