// Everything the reports show about one run, computed once.
#pragma once

#include "analyze/compiled.h"
#include "analyze/diagnosis.h"
#include "analyze/experiments.h"
#include "analyze/flame.h"
#include "analyze/gpu/gpu_report.h"
#include "analyze/layers.h"
#include "analyze/nvml.h"
#include "analyze/cross_rank.h"
#include "analyze/steps.h"
#include "analyze/summary.h"
#include "model/run.h"

namespace torchneck {

struct Analysis {
  Summary summary;
  StepAnalysis steps;
  LayerAnalysis layers;
  CompileAnalysis compiled;  // torch.compile: what was seen of it
  Diagnosis diagnosis;
  MemoryAnalysis memory;  // resident memory over the run (analyze/memory.h)
  GcAnalysis gc;          // garbage collections
  NvmlAnalysis nvml;      // the GPUs over the whole run, from NVML (analyze/nvml.h)
  // run --try: each experiment's measurement (analyze/experiments.h); they
  // point into the Run analysed.
  std::vector<ExperimentResult> experiments;
  // `torchneck analyze` of Kineto traces: one report per rank (empty for a
  // live run); profile.json's "gpu" is the first, "ranks" all of them.
  std::vector<gpu::GpuReport> gpu;
  // A distributed job's ranks side by side (analyze/cross_rank.h): empty for one
  // process. The rest of the analysis is then the lowest rank's.
  RankAnalysis ranks;
  // The flame graph of the Python stacks and the operators under them
  // (stacks.folded, profile.speedscope.json, report.html's): add_flame().
  FlameNode flame;
};

// A live run: `gpu`, when a GPU trace was recorded with it (a Kineto window
// of the run), gives the GPU detectors their evidence (the first report's,
// as for `torchneck analyze`), combined by the same rule (combine_findings).
// `launches` (gpu/gpu_window.h): the window's device work by launch, for
// the layers' GPU times.
inline Analysis analyze(const Run& run, const SummaryOptions& options, std::vector<gpu::GpuReport> gpu = {},
                        const std::vector<GpuLaunch>* launches = nullptr, RankAnalysis ranks = {}) {
  Analysis a;
  a.summary = summarize(run, options);
  a.steps = analyze_steps(run);
  a.layers = analyze_layers(run, a.steps.evaluation, launches);
  a.compiled = analyze_compiled(run, a.steps);
  a.gpu = std::move(gpu);
  a.ranks = std::move(ranks);
  DiagnosisInput in = diagnosis_input(run, a.steps, a.layers);
  if (!a.gpu.empty()) in.gpu = &a.gpu.front();
  if (!a.ranks.empty()) in.ranks = &a.ranks;
  a.diagnosis = diagnose(in);
  a.memory = in.memory;
  a.gc = in.gc;
  a.nvml = analyze_nvml(run, a.steps);
  a.experiments = analyze_experiments(run);
  apply_experiments(a.diagnosis, a.experiments, a.steps);
  return a;
}

// The flame graph, apart from analyze(): the pipeline builds it beside
// trace.json, on the thread that waits for a trace's GPU reports.
inline void add_flame(Analysis& a, const Run& run) { a.flame = build_flame(run); }

// `torchneck analyze`: the GPU reports are computed on a second thread while
// the CPU side is analysed, and arrive after analyze(); their first rank's
// findings (the GPU detectors' on it, GpuReport::findings) combine with the
// CPU side's as in diagnose().
inline void add_gpu_reports(Analysis& a, std::vector<gpu::GpuReport> reports) {
  a.gpu = std::move(reports);
  if (!a.gpu.empty()) combine_findings(a.diagnosis, a.gpu.front().findings, a.steps);
}

}  // namespace torchneck
