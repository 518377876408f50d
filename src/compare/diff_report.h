// The three forms of a RunDiff (docs/diff.md): the terminal report,
// diff.json (schema torchneck.diff/1) and diff.html (one self-contained page
// in report.html's style).
#pragma once

#include <string>

#include "compare/diff.h"

namespace torchneck::compare {

inline constexpr const char* kDiffSchema = "torchneck.diff/1";

// One sentence: faster / slower / no significant change, and what moved most.
std::string diff_verdict(const RunDiff& d);
std::string diff_text(const RunDiff& d);
std::string diff_json(const RunDiff& d);
std::string diff_html(const RunDiff& d);

}  // namespace torchneck::compare
