// What Python knows about the run and hands to the native session, in one
// typed structure: the model's own RunInfo, EnvFacts (with DataLoaderFacts
// and OptimizerFacts) and ProcessInfo, bound as Python classes with their
// fields as attributes (python/torchneck/facts.py builds them, one function
// per struct). A misspelled attribute, or a value of the wrong type, is an
// error in Python at once, not a silently missing fact.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/run.h"

namespace torchneck {

struct RunFacts {
  // The script and how it ended. python_mode is the session's own and is
  // not set from Python.
  RunInfo run;
  EnvFacts env;
  std::vector<std::string> notes;  // what the launcher could not do, and why
  std::map<uint64_t, std::string> thread_names;  // Linux thread id → Python thread name
  uint64_t main_tid = 0;  // Python's main thread; 0: the thread that started the session
  // This process (the main one, or a DataLoader worker); none for a spill's
  // facts, which the session describes itself.
  std::optional<ProcessInfo> process;
  // Tensors of the script whose autograd graph kept growing (graph_watch.py).
  std::vector<GrowingGraph> growing_graphs;
  // The GPU window (gpu_window.py); mode empty in a spill's facts.
  GpuWindow gpu_window;
  // Who this process is in a distributed job (facts.py rank_info); -1s when not.
  RankInfo rank;
};

// RunFacts, RunInfo, EnvFacts, DataLoaderFacts, OptimizerFacts, ProcessInfo
// GrowingGraph, and the enums PythonMode, ProcessRole and Ending, on module m.
void bind_facts(pybind11::module_& m);

}  // namespace torchneck
