// Findings: what holds the step back, the numbers it rests on, the change to
// make and what it should gain. Detectors (one per file in detectors/) read a
// DiagnosisInput, which is derived from a Run or written by hand in tests.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analyze/layers.h"
#include "analyze/steps.h"
#include "analyze/summary.h"  // share()
#include "model/run.h"

namespace torchneck {

// A Python function's time inside data loading (Dataset.__getitem__,
// transforms, collate, the DataLoader iterator).
struct DataFunction {
  std::string function;
  std::string file;
  int line = 0;
  int64_t self_ns = 0;
};

struct DiagnosisInput {
  EnvFacts env;
  std::string python_mode;
  StepAnalysis steps;
  std::vector<LayerStats> layers;            // sorted by forward + backward
  std::vector<DataFunction> data_functions;  // sorted by self time
  int64_t data_python_ns = 0;                // all Python time inside data loading
  // Share of the main thread's wall time it spent on a CPU, -1 when unknown:
  // tells loading that computes (workers compete for cores) from loading
  // that waits (sleep, I/O: workers overlap freely).
  double main_cpu_fraction = -1;
  // DataLoader worker processes (Run::processes without the main one), and
  // the function the workers spent most of their batch-producing time in.
  std::vector<ProcessInfo> workers;
  std::string worker_top_function;  // "file.py:12(name)", "" when none
  double worker_top_share = 0;      // of the workers' busy Python self time
};

// Of the time the main thread waits for data (share `data_share` of the
// run), the fraction it is busy on a CPU, assuming the rest of the step is
// CPU-bound; -1 when unknown.
double loading_cpu_fraction(const DiagnosisInput& in);

struct Finding {
  std::string id;        // stable: "input_bound", "heavy_layer", ...
  std::string severity;  // "high", "medium", "low"
  std::string title;     // one line
  std::vector<std::string> evidence;  // the numbers it rests on
  std::string recommendation;         // the code to change
  std::optional<double> estimated_gain_pct;  // step time saved; none when it cannot be backed
  std::string gain_arithmetic;        // how the estimate was made
};

struct Diagnosis {
  std::vector<Finding> findings;  // by estimated gain, then severity
  std::string verdict;            // one sentence
};

DiagnosisInput diagnosis_input(const Run& run, const StepAnalysis& steps, const LayerAnalysis& layers);
// Sorts the findings (estimated gain, then severity) and writes the verdict;
// diagnose() ends with it, and callers that add findings of their own (GPU
// detectors of an analysed trace) call it again.
void finish_diagnosis(Diagnosis& d, const StepAnalysis& steps);

Diagnosis diagnose(const DiagnosisInput& in);

// The detectors (detectors/*.cc). Each appends at most one finding.
void detect_input_bound(const DiagnosisInput& in, std::vector<Finding>& out);
void detect_slow_data_transform(const DiagnosisInput& in, std::vector<Finding>& out);
void detect_heavy_layer(const DiagnosisInput& in, std::vector<Finding>& out);
void detect_framework_overhead(const DiagnosisInput& in, std::vector<Finding>& out);
void detect_cpu_threads_underused(const DiagnosisInput& in, std::vector<Finding>& out);
void detect_optimizer_heavy(const DiagnosisInput& in, std::vector<Finding>& out);

// Shared helpers for detectors' text.
std::string fmt_ms(int64_t ns);       // "12.3 ms"
std::string fmt_pct(double fraction);  // "42 %"

}  // namespace torchneck
