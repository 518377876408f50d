// What the run shows of torch.compile. Dynamo and inductor make no module
// scopes inside a compiled region and, on the CPU, their fused kernels make
// no operator events; what the collectors do see, by name:
//   "Torch-Compiled Region: F/R"  a call of compiled frame F, compilation R
//                                 (R > 0: a recompilation); torch 2.x
//   "CompiledFunction"            the compiled forward graph (AOTAutograd's
//                                 autograd.Function); its self time is the
//                                 generated code's, extern kernels
//                                 (aten::mm, aten::addmm) are its children
//   "CompiledFunctionBackward"    the compiled backward graph (autograd node,
//                                 matched to CompiledFunction by sequence nr)
//   "<what> (dynamo_timed)"       user scopes around Dynamo's, AOTAutograd's
//                                 and inductor's compile work
// and the compiled module itself from outside, as its OptimizedModule
// wrapper (ModuleInfo::compiled).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analyze/steps.h"
#include "model/run.h"

namespace torchneck {

struct CompileAnalysis {
  bool seen = false;                 // anything below
  std::vector<std::string> modules;  // compiled modules that were called, by name
  std::vector<std::string> graphs;   // distinct "Torch-Compiled Region" names
  uint64_t recompiles = 0;           // of them, recompilations (R > 0)
  uint64_t region_calls = 0;         // exact (aggregates)
  uint64_t forward_calls = 0;        // CompiledFunction, exact
  int64_t forward_ns = 0;            //   total time
  uint64_t backward_calls = 0;       // CompiledFunctionBackward, exact
  int64_t backward_ns = 0;           //   total time
  // Wall time spent compiling: the union of the dynamo_timed scopes on all
  // threads, from the timeline window.
  int64_t compile_ns = 0;
  std::vector<size_t> compile_steps;  // indices into StepAnalysis::steps
};

// The time spans of compile work (dynamo_timed scopes, all threads, merged
// where they overlap), in time order.
std::vector<std::pair<int64_t, int64_t>> compile_spans(const Run& run);

CompileAnalysis analyze_compiled(const Run& run, const StepAnalysis& steps);

}  // namespace torchneck
