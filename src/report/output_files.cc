#include "report/output_files.h"

#include <stdexcept>

#include "analyze/flame.h"
#include "core/files.h"
#include "core/timing.h"
#include "report/flame_files.h"
#include "report/html_report.h"
#include "report/profile_json.h"
#include "report/pstats_writer.h"
#include "report/terminal_report.h"
#include "report/trace_json.h"

namespace torchneck {

std::string write_outputs(const Run& run, const OutputOptions& options, std::string* error) {
  return write_analysed(run, analyze(run, options.summary), options, error);
}

// The reports are made again from the run or the trace: the old file is
// removed before the new one is renamed in (core/files.h: on ext4, a rename
// over the old trace.json also wrote the new one back at once, 4-6 ms).
constexpr Replace kReplace = Replace::kRemoveOldFirst;

std::string write_analysed(const Run& run, const Analysis& analysis, const OutputOptions& options,
                           std::string* error) {
  TerminalReportOptions t;
  t.output_dir = options.dir;
  t.cwd = options.cwd;
  std::string text = terminal_report(run, analysis, t);
  timing_phase("terminal report", 2);
  if (!options.dir.empty()) {
    try {
      write_file_atomically(options.dir + "/profile.json", profile_json(run, analysis), kReplace);
      timing_phase("profile.json", 2);
      if (run.run.python_mode == PythonMode::kTrace)
        write_file_atomically(options.dir + "/python.pstats", pstats_bytes(run), kReplace);
      // flame graph data (docs/flame-graphs.md), also drawn in report.html
      const FlameNode flame = build_flame(run);
      timing_phase("flame tree", 2);
      write_file_atomically(options.dir + "/stacks.folded", folded_stacks(flame), kReplace);
      write_file_atomically(options.dir + "/profile.speedscope.json",
                            speedscope_json(flame, run.run.script.empty() ? "torchneck" : run.run.script), kReplace);
      timing_phase("flame files", 2);
      write_file_atomically(options.dir + "/report.txt", text, kReplace);
      write_file_atomically(options.dir + "/report.html", html_report_for_run(run, analysis, flame), kReplace);
      timing_phase("report.html", 2);
      if (options.write_trace) {
        write_trace_json(run, analysis, options);
        timing_phase("trace.json", 2);
      }
    } catch (const std::runtime_error& e) {
      if (error == nullptr) throw;
      *error = e.what();
    }
  }
  return text;
}

void write_trace_json(const Run& run, const Analysis& analysis, const OutputOptions& options) {
  write_file_atomically(
      options.dir + "/trace.json",
      [&](const std::function<void(std::string_view)>& sink) {
        if (!options.rank_traces.empty()) ranks_trace_json(options.rank_traces, options.rank_clock, options.trace, sink);
        else trace_json(run, analysis, options.trace, sink);
      },
      kReplace);
}

}  // namespace torchneck
