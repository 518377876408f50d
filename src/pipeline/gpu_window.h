// The GPU window's trace (model/run.h, GpuWindow; python/torchneck/
// gpu_window.py records it) read back at the end of a live run, moved onto
// the run's clock, through the same ingest and GPU analyses as `torchneck
// analyze`.
#pragma once

#include "analyze/analysis.h"
#include "model/run.h"

namespace torchneck {

// The run's analysis, with its GPU window's when one was recorded: the
// trace is parsed, moved onto the run's clock, and gives the GPU report
// (profile.json's "gpu", the GPU findings) and the layers' GPU times. When
// the trace cannot be read, the analysis without it, and a one-line note in
// run.notes that says why.
Analysis analyze_with_gpu_window(Run& run, const SummaryOptions& options, RankAnalysis ranks = {});

}  // namespace torchneck
