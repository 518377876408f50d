// Shared reading of the op timeline for the analyses: what an event is
// (by its interned name and kind), and each event's self time.
#pragma once

#include <string_view>
#include <vector>

#include "model/run.h"

namespace torchneck {

// A DataLoader fetch (__next__): what TimelineView::is_data says, for a
// reader that needs no view.
bool is_data_fetch(const Run& run, const OpEvent& e);

struct TimelineView {
  explicit TimelineView(const Run& run);

  std::string_view name(const OpEvent& e) const;
  bool is_data(const OpEvent& e) const;          // DataLoader __next__
  bool is_optimizer_step(const OpEvent& e) const;
  bool is_optimizer(const OpEvent& e) const;     // step or zero_grad
  bool is_profiler_step(const OpEvent& e) const; // ProfilerStep#N
  bool is_backward(const OpEvent& e) const;      // node or engine wrapper
  bool is_backward_scope(const OpEvent& e) const;  // torchneck::backward (the launcher's)
  bool is_tool_scope(const OpEvent& e) const;      // torchneck::graph_watch (the launcher's own work)
  bool is_eval_mark(const OpEvent& e) const;       // torchneck::eval_mode: a model.eval() (the launcher's)
  bool is_train_mark(const OpEvent& e) const;      // torchneck::train_mode: a model.train()

  const Run& run;
  // Indices into run.timeline of the main thread's events, in start order.
  std::vector<size_t> main_events;
  // Self time of every timeline event (duration minus direct children on
  // the same thread).
  std::vector<int64_t> self_ns;
};

}  // namespace torchneck
