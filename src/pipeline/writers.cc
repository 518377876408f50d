#include "pipeline/writers.h"

#include "core/files.h"
#include "report/flame_files.h"
#include "report/html_report.h"
#include "report/profile_json.h"
#include "report/pstats_writer.h"
#include "report/trace_json.h"

namespace torchneck {
namespace {

// The reports are made again from the run or the trace: the old file is
// removed before the new one is renamed in (core/files.h: on ext4, a rename
// over the old trace.json also wrote the new one back at once).
constexpr Replace kReplace = Replace::kRemoveOldFirst;

void write_profile_json(const Analysed& a, const PipelineOptions&, const std::string& path) {
  write_file_atomically(path, profile_json(*a.run, a.analysis), kReplace);
}

bool traced_python(const Analysed& a) { return a.run->run.python_mode == PythonMode::kTrace; }

void write_pstats(const Analysed& a, const PipelineOptions&, const std::string& path) {
  write_file_atomically(path, pstats_bytes(*a.run), kReplace);
}

void write_folded_stacks(const Analysed& a, const PipelineOptions&, const std::string& path) {
  write_file_atomically(path, folded_stacks(a.analysis.flame), kReplace);
}

void write_speedscope(const Analysed& a, const PipelineOptions&, const std::string& path) {
  const std::string& script = a.run->run.script;
  write_file_atomically(path, speedscope_json(a.analysis.flame, script.empty() ? "torchneck" : script), kReplace);
}

void write_html_report(const Analysed& a, const PipelineOptions&, const std::string& path) {
  write_file_atomically(path, html_report_for_run(*a.run, a.analysis), kReplace);
}

// Streamed to disk as it is made: a long run's timeline is never whole in
// memory. Several ranks on one clock: every rank's, as one process group each.
void write_trace_json(const Analysed& a, const PipelineOptions& options, const std::string& path) {
  TraceJsonOptions trace;
  trace.steps = options.settings.trace_steps;
  trace.pid = a.trace_pid;
  write_file_atomically(
      path,
      [&](const std::function<void(std::string_view)>& sink) {
        if (!a.rank_traces.empty()) ranks_trace_json(a.rank_traces, a.rank_clock, trace, sink);
        else trace_json(*a.run, a.analysis, trace, sink);
      },
      kReplace);
}

}  // namespace

const std::vector<Writer>& registered_writers() {
  static const std::vector<Writer> writers = {
      {"report.html", "open in a browser (one self-contained page, works offline)", true, nullptr,
       &write_html_report},
      {"trace.json", "timeline: https://ui.perfetto.dev (Open trace file) or chrome://tracing", false, nullptr,
       &write_trace_json},
      // docs/flame-graphs.md
      {"stacks.folded", "flame graph: flamegraph.pl stacks.folded > flame.svg", true, nullptr, &write_folded_stacks},
      {"profile.speedscope.json", "flame graph: speedscope FILE, or drop it on https://www.speedscope.app", true,
       nullptr, &write_speedscope},
      {"profile.json", "machine-readable profile (schema torchneck.profile/2)", true, nullptr, &write_profile_json},
      {"python.pstats", "python3 -m pstats FILE (or snakeviz FILE)", true, &traced_python, &write_pstats},
  };
  return writers;
}

}  // namespace torchneck
