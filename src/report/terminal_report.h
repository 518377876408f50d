// The terminal report: what a user reads first. Plain text, fixed-width
// columns, no colour codes (it is also saved as report.txt).
#pragma once

#include <string>
#include <vector>

#include "analyze/analysis.h"
#include "model/run.h"

namespace torchneck {

struct TerminalReportOptions {
  std::string cwd;  // file paths under it are shown relative
  size_t top = kDefaultTop;  // rows in the layer and GPU tables (Summary ranks the others)
};

// The report, without its "Files" section (files_section: it lists only
// the files that were written, so it is added once they are).
std::string terminal_report(const Run& run, const Analysis& analysis,
                            const TerminalReportOptions& options);

// One file written into the output folder, and how to open it.
struct WrittenFile {
  std::string name;  // "report.html"
  std::string how;   // "open in a browser (...)"
};

// The report's last section: each of WRITTEN (files written into DIR), in
// the order given, and a line for each of FAILED ("trace.json: No space
// left on device").
std::string files_section(const std::string& dir, const std::vector<WrittenFile>& written,
                          const std::vector<std::string>& failed);

// "train.py:12(step)" or "{built-in method builtins.len}", as pstats prints.
std::string pstats_label(const PyFunctionStats& f, const std::string& cwd);

}  // namespace torchneck
