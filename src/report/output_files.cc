#include "report/output_files.h"

#include <stdexcept>

#include "core/files.h"
#include "report/profile_json.h"
#include "report/pstats_writer.h"
#include "report/terminal_report.h"
#include "report/trace_json.h"

namespace torchneck {

std::string write_outputs(const Run& run, const OutputOptions& options, std::string* error) {
  return write_analysed(run, analyze(run, options.summary), options, error);
}

std::string write_analysed(const Run& run, const Analysis& analysis, const OutputOptions& options,
                           std::string* error) {
  TerminalReportOptions t;
  t.output_dir = options.dir;
  t.cwd = options.cwd;
  std::string text = terminal_report(run, analysis, t);
  if (!options.dir.empty()) {
    try {
      write_file_atomically(options.dir + "/profile.json", profile_json(run, analysis));
      if (run.run.python_mode == "trace")
        write_file_atomically(options.dir + "/python.pstats", pstats_bytes(run));
      write_file_atomically(options.dir + "/report.txt", text);
      write_file_atomically(options.dir + "/trace.json", trace_json(run, analysis, options.trace));
    } catch (const std::runtime_error& e) {
      if (error == nullptr) throw;
      *error = e.what();
    }
  }
  return text;
}

}  // namespace torchneck
