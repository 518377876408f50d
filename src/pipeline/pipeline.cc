#include "pipeline/pipeline.h"

#include <algorithm>
#include <functional>
#include <future>
#include <stdexcept>
#include <vector>

#include "core/files.h"
#include "core/timing.h"
#include "pipeline/writers.h"
#include "report/printable.h"
#include "report/profile_json.h"
#include "report/terminal_report.h"

namespace torchneck {
namespace {

// What a command wrote into its output folder, for the Files section.
struct WrittenFiles {
  std::vector<std::string> names;   // written, as "report.html"
  std::vector<std::string> failed;  // "trace.json: why", one each
  std::string first_error;          // the first failure's one-line message

  void add(const WrittenFiles& other) {
    names.insert(names.end(), other.names.begin(), other.names.end());
    failed.insert(failed.end(), other.failed.begin(), other.failed.end());
    if (first_error.empty()) first_error = other.first_error;
  }
};

// "cannot write DIR/NAME: why" -> "why", for the Files section's line.
std::string reason_of(const std::string& message) {
  const size_t colon = message.rfind(": ");
  return colon == std::string::npos ? message : message.substr(colon + 2);
}

// Runs WRITE (which throws std::runtime_error on failure) and records NAME's outcome.
void attempt(WrittenFiles& written, const std::string& name, const std::function<void()>& write) {
  try {
    write();
    written.names.push_back(name);
  } catch (const std::runtime_error& e) {
    written.failed.push_back(name + ": " + reason_of(e.what()));
    if (written.first_error.empty()) written.first_error = e.what();
  }
}

enum class WhichWriters { kAll, kStepsOnly, kWholeAnalysis };

void write_files(const Analysed& a, const PipelineOptions& options, WhichWriters which, WrittenFiles& written) {
  if (options.dir.empty()) return;
  for (const Writer& w : registered_writers()) {
    if (which == WhichWriters::kStepsOnly && w.needs_whole_analysis) continue;
    if (which == WhichWriters::kWholeAnalysis && !w.needs_whole_analysis) continue;
    if (w.wanted != nullptr && !w.wanted(a)) continue;
    attempt(written, w.file, [&] { w.write(a, options, options.dir + "/" + w.file); });
    timing_phase(w.file, 2);
  }
}

std::string terminal_text(const Analysed& a, const PipelineOptions& options) {
  TerminalReportOptions t;
  t.cwd = options.cwd;
  t.top = options.settings.top;
  std::string text = printable_text(terminal_report(*a.run, a.analysis, t));
  timing_phase("terminal report", 2);
  return text;
}

// The Files section's rows: the writers' files that were written, in the
// registry's order, then report.txt when WITH_TXT.
std::vector<WrittenFile> file_rows(const WrittenFiles& written, bool with_txt) {
  std::vector<WrittenFile> rows;
  for (const Writer& w : registered_writers())
    if (std::find(written.names.begin(), written.names.end(), w.file) != written.names.end())
      rows.push_back({w.file, w.how_to_open});
  if (with_txt) rows.push_back({"report.txt", "this report"});
  return rows;
}

// Appends the Files section to TEXT and writes it as report.txt (the
// section names report.txt only if that write succeeded); returns the text.
std::string finish_report_txt(std::string text, const PipelineOptions& options, WrittenFiles& written,
                              std::string* error) {
  if (!options.dir.empty()) {
    const std::string full = text + printable_text(files_section(options.dir, file_rows(written, true), written.failed));
    attempt(written, "report.txt",
            [&] { write_file_atomically(options.dir + "/report.txt", full, Replace::kRemoveOldFirst); });
    const bool txt = std::find(written.names.begin(), written.names.end(), "report.txt") != written.names.end();
    text += printable_text(files_section(options.dir, file_rows(written, txt), written.failed));
  }
  if (!written.first_error.empty()) {
    const size_t more = written.failed.size() - 1;
    const std::string message = written.first_error + (more > 0 ? " (and " + std::to_string(more) + " more file" +
                                                                       (more > 1 ? "s" : "") + ")"
                                                                 : "");
    if (error == nullptr) throw std::runtime_error(message);
    *error = message;
  }
  return text;
}

// The analysis' second stage and every file, report.txt last.
std::string write_report(Analysed& a, const PipelineOptions& options, std::string* error) {
  WrittenFiles written;
  std::string text;
  if (a.gpu_reports.valid() && !options.dir.empty()) {
    // The files that need the GPU reports on a second thread, once they are
    // in; meanwhile this one writes those that need only the steps.
    WrittenFiles late;
    auto rest = std::async(std::launch::async, [&] {
      complete_analysis(a);
      std::string t = terminal_text(a, options);
      write_files(a, options, WhichWriters::kWholeAnalysis, late);
      return t;
    });
    write_files(a, options, WhichWriters::kStepsOnly, written);
    text = rest.get();
    written.add(late);
  } else {
    complete_analysis(a);
    text = terminal_text(a, options);
    write_files(a, options, WhichWriters::kAll, written);
  }
  return finish_report_txt(std::move(text), options, written, error);
}

}  // namespace

std::string report(Source& source, const PipelineOptions& options, std::string* error) {
  Analysed a = analyse(source, options);
  return write_report(a, options, error);
}

std::string profile_json_text(Source& source, const PipelineOptions& options) {
  Analysed a = analyse(source, options);
  complete_analysis(a);
  return profile_json(*a.run, a.analysis);
}

}  // namespace torchneck
