// The terminal report: what a user reads first. Plain text, fixed-width
// columns, no colour codes (it is also saved as report.txt).
#pragma once

#include <string>

#include "analyze/analysis.h"
#include "model/run.h"

namespace torchneck {

struct TerminalReportOptions {
  std::string output_dir;  // printed at the end with the files written there
  std::string cwd;         // file paths under it are shown relative
};

std::string terminal_report(const Run& run, const Analysis& analysis,
                            const TerminalReportOptions& options);

// "train.py:12(step)" or "{built-in method builtins.len}", as pstats prints.
std::string pstats_label(const PyFunctionStats& f, const std::string& cwd);

}  // namespace torchneck
