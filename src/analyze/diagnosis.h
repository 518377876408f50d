// Findings: what holds the step back, the numbers it rests on, the change to
// make and what it should gain. Detectors (one per file in detectors/,
// registered in detectors/registry.cc) read a DiagnosisInput: the CPU
// evidence, derived from a Run or written by hand in tests, and the GPU
// evidence of a Kineto trace when there is one.
#pragma once

#include <string>
#include <vector>

#include "analyze/findings.h"
#include "analyze/layers.h"
#include "analyze/memory.h"
#include "analyze/steps.h"
#include "analyze/summary.h"  // share()
#include "model/run.h"

namespace torchneck {

namespace gpu {
struct GpuReport;
}
struct RankAnalysis;

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
  PythonMode python_mode = PythonMode::kOff;
  StepAnalysis steps;
  std::vector<LayerStats> layers;            // sorted by forward + backward
  std::vector<DataFunction> data_functions;  // sorted by self time
  int64_t data_python_ns = 0;                // all Python time inside data loading
  // Share of the main thread's wall time it spent on a CPU, -1 when unknown:
  // tells loading that computes (workers compete for cores) from loading
  // that waits (sleep, I/O: workers overlap freely).
  double main_cpu_fraction = -1;
  // Of the main thread's time in DataLoader __next__ less its waits for a
  // core, the share it ran on a CPU (Run::data_wait_cpu_ns); -1 unknown.
  // Where known, loading_cpu_fraction() is this.
  double data_wait_cpu_fraction = -1;
  // Share of the training loop (its step clocks, first to last; else the
  // whole run) the main thread was runnable but waiting for a CPU
  // (schedstat), -1 when unknown: cores contended by workers and threads,
  // or by other work (other_cores).
  double main_runqueue_fraction = -1;
  // Cores other work on the machine took on average over the run: every
  // process's CPU time (/proc/stat) less this job's (its process and its
  // DataLoader workers), over the wall time; and the share of the machine's
  // CPU time a hypervisor gave other guests (steal). -1 unknown.
  double other_cores = -1;
  double steal_share = -1;
  // DataLoader worker processes (Run::processes without the main one), and
  // the function the workers spent most of their batch-producing time in.
  std::vector<ProcessInfo> workers;
  int64_t workers_alive_at_once = 0;  // the most of them alive at one instant (peak_alive_workers)
  std::string worker_top_function;  // "file.py:12(name)", "" when none
  double worker_top_share = 0;      // of the workers' busy Python self time
  // Resident memory and garbage collections against the steady steps
  // (analyze/memory.h), and the tensors whose autograd graph kept growing.
  MemoryAnalysis memory;
  GcAnalysis gc;
  std::vector<GrowingGraph> growing_graphs;
  // The GPU evidence: a Kineto trace's report (its first rank's), null on a
  // live run and for the CPU-side detectors' tests. GPU detectors read only
  // this; CPU detectors never read it.
  const gpu::GpuReport* gpu = nullptr;
  // The ranks of a distributed job side by side (analyze/cross_rank.h), null for
  // one process. Rank detectors read only this.
  const RankAnalysis* ranks = nullptr;
};

// Of the time the main thread waits for data, the fraction it is busy on a
// CPU: measured at the fetches where the collector did (data_wait_cpu_fraction),
// else estimated from the main thread's CPU time over the run, assuming the
// rest of the step is CPU-bound; -1 when unknown.
double loading_cpu_fraction(const DiagnosisInput& in);

// How busy the machine was while the run was measured (DiagnosisInput's
// figures), said beside every verdict; -1 unknown (a Kineto trace).
struct MachineLoad {
  double cpu_wait_share = -1;  // main_runqueue_fraction
  double other_cores = -1;
  double steal_share = -1;
  int64_t cores = 0;
  bool busy() const;  // the loop waited for a CPU >= kContendedRunqueueShare of the run
};

struct Diagnosis {
  std::vector<Finding> findings;  // by estimated gain, then severity
  std::string verdict;            // one sentence, then the busy machine's when busy
  MachineLoad load;
};

DiagnosisInput diagnosis_input(const Run& run, const StepAnalysis& steps, const LayerAnalysis& layers);

// The evidence a detector reads (detectors/registry.cc says each one's).
enum class Evidence : uint8_t { kCpu, kGpu, kRanks };

// Every detector has this shape: it reads the input and appends at most one
// finding of its id.
using Detector = void (*)(const DiagnosisInput& in, std::vector<Finding>& out);

struct RegisteredDetector {
  const char* name;  // the function's, for tests' messages
  Evidence evidence;
  Detector detect;
};

// All detectors, in the order they run (detectors/registry.cc).
const std::vector<RegisteredDetector>& detectors();

// The findings of the detectors that read `evidence`, in registration order.
// The GPU ones find nothing when in.gpu is null.
std::vector<Finding> run_detectors(const DiagnosisInput& in, Evidence evidence);

// The one rule for a finding seen on both sides: where the GPU side has a
// finding of an id, it replaces the CPU side's of that id (on a GPU run the
// device's timeline says what the step waits for; the CPU side's estimate
// assumes CPU-bound work). Then sorts and writes the verdict
// (finish_diagnosis). `d` holds the CPU findings. Used by diagnose() and by
// `torchneck analyze`, whose GPU reports arrive after the CPU side's
// diagnosis (analysis.h, add_gpu_reports).
void combine_findings(Diagnosis& d, const std::vector<Finding>& gpu_findings, const StepAnalysis& steps);

// Sorts the findings (estimated gain, then severity), gives each its
// confidence from the steps it rests on (their number and spread: with
// fewer than kMinStepsToDecide steps after warm-up no finding is above low,
// and the verdict says what could not be decided; on a busy machine, one
// level lower, saying why), and writes the verdict.
void finish_diagnosis(Diagnosis& d, const StepAnalysis& steps);

// The CPU detectors, the rank ones when in.ranks is set, the GPU ones when
// in.gpu is set, combined.
Diagnosis diagnose(const DiagnosisInput& in);

}  // namespace torchneck
