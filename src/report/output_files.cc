#include "report/output_files.h"

#include <stdexcept>

#include "analyze/flame.h"
#include "core/files.h"
#include "core/timing.h"
#include "report/flame_files.h"
#include "report/html_report.h"
#include "report/printable.h"
#include "report/profile_json.h"
#include "report/pstats_writer.h"
#include "report/terminal_report.h"
#include "report/trace_json.h"

namespace torchneck {

namespace {

// The reports are made again from the run or the trace: the old file is
// removed before the new one is renamed in (core/files.h: on ext4, a rename
// over the old trace.json also wrote the new one back at once, 4-6 ms).
constexpr Replace kReplace = Replace::kRemoveOldFirst;

// "cannot write DIR/NAME: why" -> "why", for the Files section's line.
std::string reason_of(const std::string& message) {
  const size_t colon = message.rfind(": ");
  return colon == std::string::npos ? message : message.substr(colon + 2);
}

}  // namespace

void WrittenFiles::attempt(const std::string& name, const std::function<void()>& write) {
  try {
    write();
    names.push_back(name);
  } catch (const std::runtime_error& e) {
    failed.push_back(name + ": " + reason_of(e.what()));
    if (first_error.empty()) first_error = e.what();
  }
}

void WrittenFiles::add(const WrittenFiles& other) {
  names.insert(names.end(), other.names.begin(), other.names.end());
  failed.insert(failed.end(), other.failed.begin(), other.failed.end());
  if (first_error.empty()) first_error = other.first_error;
}

std::string write_outputs(const Run& run, const OutputOptions& options, std::string* error) {
  return write_analysed(run, analyze(run, options.summary), options, error);
}

std::string write_analysed(const Run& run, const Analysis& analysis, const OutputOptions& options,
                           std::string* error) {
  WrittenFiles written;
  std::string text = write_report_files(run, analysis, options, written);
  if (!options.dir.empty() && options.write_trace) {
    written.attempt("trace.json", [&] { write_trace_json(run, analysis, options); });
    timing_phase("trace.json", 2);
  }
  return finish_report_txt(std::move(text), options, written, error);
}

std::string write_report_files(const Run& run, const Analysis& analysis, const OutputOptions& options,
                               WrittenFiles& written) {
  TerminalReportOptions t;
  t.cwd = options.cwd;
  std::string text = printable_text(terminal_report(run, analysis, t));
  timing_phase("terminal report", 2);
  if (options.dir.empty()) return text;
  const std::string& dir = options.dir;
  written.attempt("profile.json",
                  [&] { write_file_atomically(dir + "/profile.json", profile_json(run, analysis), kReplace); });
  timing_phase("profile.json", 2);
  if (run.run.python_mode == PythonMode::kTrace)
    written.attempt("python.pstats",
                    [&] { write_file_atomically(dir + "/python.pstats", pstats_bytes(run), kReplace); });
  // flame graph data (docs/flame-graphs.md), also drawn in report.html
  const FlameNode flame = build_flame(run);
  timing_phase("flame tree", 2);
  written.attempt("stacks.folded",
                  [&] { write_file_atomically(dir + "/stacks.folded", folded_stacks(flame), kReplace); });
  written.attempt("profile.speedscope.json", [&] {
    write_file_atomically(dir + "/profile.speedscope.json",
                          speedscope_json(flame, run.run.script.empty() ? "torchneck" : run.run.script), kReplace);
  });
  timing_phase("flame files", 2);
  written.attempt("report.html", [&] {
    write_file_atomically(dir + "/report.html", html_report_for_run(run, analysis, flame), kReplace);
  });
  timing_phase("report.html", 2);
  return text;
}

std::string finish_report_txt(std::string text, const OutputOptions& options, WrittenFiles& written,
                              std::string* error) {
  if (!options.dir.empty()) {
    std::vector<std::string> with_txt = written.names;
    with_txt.push_back("report.txt");
    const std::string full = text + printable_text(files_section(options.dir, with_txt, written.failed));
    written.attempt("report.txt", [&] { write_file_atomically(options.dir + "/report.txt", full, kReplace); });
    text += printable_text(files_section(options.dir, written.names, written.failed));
  }
  if (!written.first_error.empty()) {
    const size_t more = written.failed.size() - 1;
    const std::string message =
        written.first_error + (more > 0 ? " (and " + std::to_string(more) + " more file" + (more > 1 ? "s" : "") + ")" : "");
    if (error == nullptr) throw std::runtime_error(message);
    *error = message;
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
