#include "ingest/kineto_to_run.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>

#include "model/op_merge.h"

namespace torchneck {
namespace {

using kineto::Cat;
using kineto::Event;

bool starts_with(std::string_view s, std::string_view p) { return s.rfind(p, 0) == 0; }

// How an event of the trace's CPU side counts in our model; false: not at all.
bool cpu_kind(const Event& e, std::string_view name, OpKind& kind) {
  if (e.cat != Cat::kCpuOp && e.cat != Cat::kUserAnnotation) return false;
  if (starts_with(name, "ProfilerStep#") || starts_with(name, "enumerate(DataLoader)") ||
      starts_with(name, "Optimizer.") || e.cat == Cat::kUserAnnotation) {
    kind = OpKind::kUserScope;
  } else if (starts_with(name, "autograd::engine::evaluate_function")) {
    kind = OpKind::kBackward;
  } else {
    kind = OpKind::kOperator;
  }
  return true;
}

}  // namespace

Run run_of_trace(kineto::Trace&& trace) {
  Run run;
  run.run.script = trace.source;
  run.run.python_mode = PythonMode::kOff;
  run.run.ending.kind = EndingKind::kIngestedTrace;
  run.rank = std::move(trace.rank);
  run.activities = std::move(static_cast<Activities&>(trace));
  index_streams(run.activities);
  run.env.cuda = !run.activities.streams.empty();
  return run;
}

void add_cpu_side(Run& run) {
  const Activities& trace = run.activities;
  run.strings = trace.names;

  // Threads: every (pid, tid) with CPU-side events, in order of appearance.
  std::map<std::pair<int64_t, int64_t>, uint32_t> thread_of;
  std::vector<size_t> ops_per_thread, steps_per_thread;
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const Event& e : trace.events) {
    OpKind kind;
    if (e.cat != Cat::kTrace) {
      first = std::min(first, e.ts_ns);
      last = std::max(last, e.end_ns());
    }
    if (!cpu_kind(e, trace.name_of(e), kind)) continue;
    auto [it, added] = thread_of.emplace(std::make_pair(e.pid, e.tid), static_cast<uint32_t>(run.threads.size()));
    if (added) {
      ThreadInfo t;
      t.os_tid = static_cast<uint64_t>(e.tid);
      auto n = trace.thread_names.find({e.pid, e.tid});
      t.name = n != trace.thread_names.end() ? n->second : "thread " + std::to_string(e.tid);
      run.threads.push_back(t);
      ops_per_thread.push_back(0);
      steps_per_thread.push_back(0);
    }
    ++ops_per_thread[it->second];
    if (starts_with(trace.name_of(e), "ProfilerStep#")) ++steps_per_thread[it->second];
  }
  run.run.wall_s = last > first ? static_cast<double>(last - first) / 1e9 : 0;
  // The main thread: the one with the ProfilerStep scopes, else the busiest.
  for (uint32_t i = 0; i < run.threads.size(); ++i) {
    const auto key = [&](uint32_t t) { return std::make_pair(steps_per_thread[t], ops_per_thread[t]); };
    if (key(i) > key(run.main_thread)) run.main_thread = i;
  }

  // Nesting per thread: events come sorted by start, longer first, so a
  // stack of open events gives parents, depths and self times.
  struct Open {
    size_t index;  // into run.timeline
    int64_t end_ns;
    int64_t child_ns;
  };
  std::vector<std::vector<Open>> stacks(run.threads.size());
  OpMerger merger;
  std::vector<int64_t> self_of;  // per timeline event
  auto close = [&](std::vector<Open>& stack) {
    const Open o = stack.back();
    stack.pop_back();
    const OpEvent& ev = run.timeline[o.index];
    self_of[o.index] = std::max<int64_t>(0, (ev.end_ns - ev.start_ns) - o.child_ns);
    if (!stack.empty()) stack.back().child_ns += ev.end_ns - ev.start_ns;
  };
  for (const Event& e : trace.events) {
    OpKind kind;
    const std::string& name = trace.name_of(e);
    if (!cpu_kind(e, name, kind)) continue;
    const uint32_t t = thread_of.at({e.pid, e.tid});
    auto& stack = stacks[t];
    while (!stack.empty() && stack.back().end_ns <= e.ts_ns) close(stack);
    OpEvent ev{};
    ev.start_ns = e.ts_ns;
    ev.end_ns = e.end_ns();
    ev.seq_nr = e.seq_nr;
    ev.forward_tid = static_cast<uint64_t>(kind == OpKind::kBackward && e.fwd_tid >= 0 ? e.fwd_tid : t);
    ev.name_id = e.name;
    ev.thread_index = t;
    ev.kind = kind;
    ev.depth = static_cast<uint8_t>(std::min<size_t>(stack.size(), 255));
    run.timeline.push_back(ev);
    self_of.push_back(0);
    stack.push_back(Open{run.timeline.size() - 1, e.end_ns(), 0});
  }
  for (auto& stack : stacks)
    while (!stack.empty()) close(stack);
  for (size_t i = 0; i < run.timeline.size(); ++i) {
    const OpEvent& ev = run.timeline[i];
    merger.add(run.strings[ev.name_id], ev.kind, ev.thread_index, 1, self_of[i], ev.end_ns - ev.start_ns);
  }
  merger.finish(run.ops, 8);
}

Run run_from_trace(kineto::Trace&& trace) {
  Run run = run_of_trace(std::move(trace));
  add_cpu_side(run);
  return run;
}

}  // namespace torchneck
