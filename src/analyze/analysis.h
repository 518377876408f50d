// Everything the reports show about one run, computed once.
#pragma once

#include "analyze/diagnosis.h"
#include "analyze/gpu/gpu_report.h"
#include "analyze/layers.h"
#include "analyze/steps.h"
#include "analyze/summary.h"
#include "model/run.h"

namespace torchneck {

struct Analysis {
  Summary summary;
  StepAnalysis steps;
  LayerAnalysis layers;
  Diagnosis diagnosis;
  // `torchneck analyze` of Kineto traces: one report per rank (empty for a
  // live run); profile.json's "gpu" is the first, "ranks" all of them.
  std::vector<gpu::GpuReport> gpu;
};

inline Analysis analyze(const Run& run, const SummaryOptions& options) {
  Analysis a;
  a.summary = summarize(run, options);
  a.steps = analyze_steps(run);
  a.layers = analyze_layers(run);
  a.diagnosis = diagnose(diagnosis_input(run, a.steps, a.layers));
  return a;
}

}  // namespace torchneck
