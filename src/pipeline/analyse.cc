#include "pipeline/analyse.h"

#include <utility>

#include "analyze/cross_rank.h"
#include "core/timing.h"
#include "ingest/kineto_to_run.h"
#include "pipeline/gpu_window.h"

namespace torchneck {
namespace {

// Every rank's steps, compared (analyze/cross_rank.h); the steps are kept for
// trace.json, which draws each rank on the ranks' common clock.
RankAnalysis compare_ranks(RunSet& set, Analysed& a) {
  std::vector<StepAnalysis> steps(set.runs.size());
  std::vector<const Run*> runs;
  std::vector<const StepAnalysis*> step_ptrs;
  for (size_t i = 0; i < set.runs.size(); ++i) {
    steps[i] = analyze_steps(set.runs[i]);
    runs.push_back(&set.runs[i]);
    step_ptrs.push_back(&steps[i]);
  }
  RankAnalysis ranks = analyze_ranks(runs, step_ptrs);
  timing_phase("ranks compared", 2);
  if (ranks.clock_offset_ns.size() == set.runs.size()) {
    a.rank_steps.resize(set.runs.size());
    for (size_t i = 0; i < set.runs.size(); ++i) {
      a.rank_steps[i].steps = std::move(steps[i]);
      a.rank_traces.push_back(RankTrace{&set.runs[i], &a.rank_steps[i], ranks.clock_offset_ns[i]});
    }
    a.rank_clock = ranks.clock;
  }
  return ranks;
}

// Traces: every rank's GPU report starts on a second thread (it reads only
// the activities and rank, kineto_to_run.h) while this one makes the CPU
// side of each run that the report needs.
Analysis analyse_traces(Source& source, const SummaryOptions& options, Analysed& a) {
  RunSet& set = source.set;
  a.gpu_reports = std::async(std::launch::async, [&set] {
    std::vector<gpu::GpuReport> reports;
    for (const Run& r : set.runs) reports.push_back(gpu::gpu_report(r));
    return reports;
  });
  Run& run = set.primary();
  add_cpu_side(run);
  timing_phase("CPU side as a run", 2);
  if (set.runs.size() > 1) {
    run.run.script = source.path;
    run.notes.push_back("several ranks: the operator tables and steps are rank " + std::to_string(run.rank.rank) +
                        "'s; the ranks are compared under \"Ranks\", and the GPU section is given for every "
                        "rank under \"ranks\"");
  }
  run.notes.insert(run.notes.end(), set.notes.begin(), set.notes.end());
  RankAnalysis ranks;
  if (set.runs.size() > 1) {
    for (size_t i = 0; i < set.runs.size(); ++i) {
      if (i > 0) add_cpu_side(set.runs[i]);
      add_collectives(set.runs[i]);
    }
    ranks = compare_ranks(set, a);
  }
  return analyze(run, options, {}, nullptr, std::move(ranks));
}

}  // namespace

Analysed analyse(Source& source, const PipelineOptions& options) {
  Analysed a;
  a.run = &source.set.primary();
  a.trace_pid = source.trace_pid;
  if (source.kind == SourceKind::kTraces) {
    a.analysis = analyse_traces(source, options.summary(), a);
  } else {
    RankAnalysis ranks;
    if (source.set.runs.size() > 1) ranks = compare_ranks(source.set, a);
    a.analysis = analyze_with_gpu_window(source.set.primary(), options.summary(), std::move(ranks));
  }
  timing_phase("analysis", 2);
  return a;
}

void complete_analysis(Analysed& a) {
  add_flame(a.analysis, *a.run);
  timing_phase("flame tree", 2);
  if (a.gpu_reports.valid()) add_gpu_reports(a.analysis, a.gpu_reports.get());
}

}  // namespace torchneck
