#include "report/output_files.h"

#include "core/files.h"
#include "report/profile_json.h"
#include "report/pstats_writer.h"
#include "report/terminal_report.h"

namespace torchneck {

std::string write_outputs(const Run& run, const OutputOptions& options) {
  const Analysis analysis = analyze(run, options.summary);
  TerminalReportOptions t;
  t.output_dir = options.dir;
  t.cwd = options.cwd;
  std::string text = terminal_report(run, analysis, t);
  if (!options.dir.empty()) {
    write_file_atomically(options.dir + "/profile.json", profile_json(run, analysis));
    if (run.run.python_mode == "trace")
      write_file_atomically(options.dir + "/python.pstats", pstats_bytes(run));
    write_file_atomically(options.dir + "/report.txt", text);
  }
  return text;
}

}  // namespace torchneck
