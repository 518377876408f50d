// Hand-built runs for the analysis tests: op events, module calls, and the
// op table the collectors would fill, sorted as a collected run is.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "model/run.h"

namespace torchneck::test_support {

struct RunBuilder {
  Run run;
  uint32_t name(const std::string& s) {
    for (uint32_t i = 0; i < run.strings.size(); ++i)
      if (run.strings[i] == s) return i;
    run.strings.push_back(s);
    return static_cast<uint32_t>(run.strings.size() - 1);
  }
  // An event on `thread`, created by forward thread `fwd_tid` (backward
  // nodes carry their forward op's).
  void event(const std::string& n, OpKind kind, int64_t start, int64_t end, int64_t seq = -1, uint32_t thread = 0,
             uint64_t fwd_tid = 1) {
    OpEvent e{};
    e.start_ns = start;
    e.end_ns = end;
    e.seq_nr = seq;
    e.forward_tid = fwd_tid;
    e.name_id = name(n);
    e.thread_index = thread;
    e.kind = kind;
    run.timeline.push_back(e);
    auto op = std::find_if(run.ops.begin(), run.ops.end(), [&](const OpStats& o) { return o.name == n && o.kind == kind; });
    if (op == run.ops.end()) {
      run.ops.emplace_back();
      op = std::prev(run.ops.end());
      op->name = n;
      op->kind = kind;
    }
    ++op->calls;
    op->total_ns += end - start;
  }
  void module(uint32_t m, int64_t enter, int64_t exit) {
    run.module_events.push_back(ModuleEvent{enter, m, 0, 0, {}});
    run.module_events.push_back(ModuleEvent{exit, m, 0, 1, {}});
  }
  void finish() {
    std::stable_sort(run.timeline.begin(), run.timeline.end(),
                     [](const OpEvent& a, const OpEvent& b) { return a.start_ns < b.start_ns; });
    std::stable_sort(run.module_events.begin(), run.module_events.end(),
                     [](const ModuleEvent& a, const ModuleEvent& b) { return a.t_ns < b.t_ns; });
  }
};

}  // namespace torchneck::test_support
