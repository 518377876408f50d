#include "analyze/timeline_view.h"

#include <algorithm>
#include <unordered_map>

namespace torchneck {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

TimelineView::TimelineView(const Run& r) : run(r), self_ns(r.timeline.size(), 0) {
  // Per thread, a stack sweep in start order (ties: outer first) finds each
  // event's direct parent.
  std::unordered_map<uint32_t, std::vector<size_t>> by_thread;
  for (size_t i = 0; i < run.timeline.size(); ++i) by_thread[run.timeline[i].thread_index].push_back(i);
  for (auto& [thread, idx] : by_thread) {
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      const OpEvent &x = run.timeline[a], &y = run.timeline[b];
      if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
      return x.end_ns > y.end_ns;  // the enclosing event first
    });
    std::vector<size_t> stack;
    for (size_t i : idx) {
      const OpEvent& e = run.timeline[i];
      self_ns[i] = e.end_ns - e.start_ns;
      while (!stack.empty() && run.timeline[stack.back()].end_ns <= e.start_ns) stack.pop_back();
      if (!stack.empty()) self_ns[stack.back()] -= e.end_ns - e.start_ns;
      stack.push_back(i);
    }
    if (thread == run.main_thread) main_events = idx;
  }
  for (auto& s : self_ns) s = std::max<int64_t>(s, 0);
}

std::string_view TimelineView::name(const OpEvent& e) const {
  return e.name_id < run.strings.size() ? std::string_view(run.strings[e.name_id]) : std::string_view();
}

bool is_data_fetch(const Run& run, const OpEvent& e) {
  return e.kind == OpKind::kUserScope && e.name_id < run.strings.size() &&
         starts_with(run.strings[e.name_id], "enumerate(DataLoader)");
}

bool TimelineView::is_data(const OpEvent& e) const { return is_data_fetch(run, e); }

bool TimelineView::is_optimizer_step(const OpEvent& e) const {
  return e.kind == OpKind::kUserScope && starts_with(name(e), "Optimizer.step#");
}

bool TimelineView::is_optimizer(const OpEvent& e) const {
  return e.kind == OpKind::kUserScope &&
         (starts_with(name(e), "Optimizer.step#") || starts_with(name(e), "Optimizer.zero_grad#"));
}

bool TimelineView::is_profiler_step(const OpEvent& e) const {
  return e.kind == OpKind::kUserScope && starts_with(name(e), "ProfilerStep#");
}

bool TimelineView::is_backward(const OpEvent& e) const {
  return e.kind == OpKind::kBackward || starts_with(name(e), "autograd::engine::evaluate_function") ||
         is_backward_scope(e);
}

// The launcher's scope around torch.autograd.backward
// (python/torchneck/backward_scope.py): seen in every step, detail windows
// or not.
bool TimelineView::is_backward_scope(const OpEvent& e) const {
  return e.kind == OpKind::kUserScope && name(e) == "torchneck::backward";
}

// The launcher's own work inside a step: the graph watch's looks
// (python/torchneck/graph_watch.py), after an optimizer step.
bool TimelineView::is_tool_scope(const OpEvent& e) const {
  return e.kind == OpKind::kUserScope && name(e) == "torchneck::graph_watch";
}

// The launcher's marks of nn.Module.train(False) and train(True)
// (python/torchneck/mode_marks.py): seen in every step.
bool TimelineView::is_eval_mark(const OpEvent& e) const {
  return e.kind == OpKind::kUserScope && name(e) == "torchneck::eval_mode";
}

bool TimelineView::is_train_mark(const OpEvent& e) const {
  return e.kind == OpKind::kUserScope && name(e) == "torchneck::train_mode";
}

}  // namespace torchneck
