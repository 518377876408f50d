#include "analyze/loop_spans.h"

#include <algorithm>
#include <map>
#include <set>

namespace torchneck {

std::vector<Span> fetch_spans(const Run& run) {
  std::vector<Span> fetches;
  for (const OpEvent& e : run.timeline)
    if (e.thread_index == run.main_thread && is_data_fetch(run, e)) fetches.emplace_back(e.start_ns, e.end_ns);
  std::sort(fetches.begin(), fetches.end());
  return fetches;
}

std::vector<Span> module_spans(const TimelineView& tv, std::vector<uint32_t>* roots) {
  const Run& run = tv.run;
  const std::vector<Span> fetches = fetch_spans(run);
  std::vector<Span> spans;
  std::vector<std::pair<uint32_t, int64_t>> stack;  // module, enter time
  for (const ModuleEvent& e : run.module_events) {
    if (e.thread_index != run.main_thread) continue;
    if (!e.is_exit) {
      stack.emplace_back(e.module, e.t_ns);
      continue;
    }
    // Pop to the matching enter: a forward that raised left its enter open.
    auto it = std::find_if(stack.rbegin(), stack.rend(), [&](const auto& s) { return s.first == e.module; });
    if (it == stack.rend()) continue;
    const size_t depth = static_cast<size_t>(stack.rend() - it) - 1;
    if (depth == 0 && !inside_any(fetches, stack[0].second, e.t_ns)) {
      spans.emplace_back(stack[0].second, e.t_ns);
      if (roots != nullptr) roots->push_back(e.module);
    }
    stack.resize(depth);
  }
  return spans;
}

bool is_frozen(const Run& run, uint32_t m) {
  return m < run.modules.size() && run.modules[m].params > 0 && run.modules[m].trainable_params == 0;
}

std::vector<Span> backward_passes(const TimelineView& tv) {
  std::vector<Span> passes;
  bool open = false;
  for (size_t i : tv.main_events) {
    const OpEvent& e = tv.run.timeline[i];
    if (tv.is_backward(e)) {
      if (!open) passes.emplace_back(e.start_ns, e.end_ns);
      open = true;
      passes.back().second = std::max(passes.back().second, e.end_ns);
    } else if (open && e.start_ns >= passes.back().second) {
      open = false;
    }
  }
  return passes;
}

bool starts_between(const std::vector<Span>& spans, int64_t from, int64_t to) {
  auto it = std::lower_bound(spans.begin(), spans.end(), Span{from, INT64_MIN});
  return it != spans.end() && it->first < to;
}

std::vector<Span> merge_unseparated(const std::vector<Span>& spans, const std::vector<Span>& separators) {
  std::vector<Span> merged;
  for (const Span& s : spans) {
    if (!merged.empty() && !starts_between(separators, merged.back().second, s.first)) {
      merged.back().second = std::max(merged.back().second, s.second);
      continue;
    }
    merged.push_back(s);
  }
  return merged;
}

bool fetches_each_iteration(const std::vector<Span>& fetches, const std::vector<Span>& updates) {
  if (fetches.empty() || updates.empty()) return false;
  auto from = std::lower_bound(fetches.begin(), fetches.end(), Span{updates.front().first, INT64_MIN});
  auto to = std::lower_bound(fetches.begin(), fetches.end(), Span{updates.back().second, INT64_MIN});
  return static_cast<size_t>(to - from) * kMaxUpdatesPerFetch >= updates.size();
}

bool inside_any(const std::vector<Span>& spans, int64_t start, int64_t end) {
  auto it = std::upper_bound(spans.begin(), spans.end(), Span{start, INT64_MAX});
  return it != spans.begin() && std::prev(it)->first <= start && std::prev(it)->second >= end;
}

namespace {

// A network the loop does not train called in at least this share of the
// iterations is part of the step (a loss network, a teacher: every
// iteration); one called in fewer is evaluated now and then (an EMA copy
// validated each epoch).
constexpr double kFrozenStepShare = 0.5;
// The model being trained, called without backward in nearly every
// iteration, does step work there (a GAN's generator making detached
// samples for the critic); evaluation of it comes every few iterations.
constexpr double kTrainedStepShare = 0.9;

// The loop's iterations as their backward work: the backward passes; in a
// loop that reads a batch each iteration, those with no fetch between them
// as one (a GAN's critic and generator passes on one batch). Sorted, disjoint.
std::vector<Span> backward_iterations(const std::vector<Span>& backward, const std::vector<Span>& fetches) {
  return fetches_each_iteration(fetches, backward) ? merge_unseparated(backward, fetches) : backward;
}

// The iteration of a call ending at t: the backward work after it
// (iterations.size() when none follows).
size_t iteration_of(const std::vector<Span>& iterations, int64_t t) {
  auto b = std::lower_bound(iterations.begin(), iterations.end(), t,
                            [](const Span& it, int64_t end) { return it.second < end; });
  return static_cast<size_t>(b - iterations.begin());
}

// Which of the calls no backward went through (`untrained`, indices into
// `forward`) are the step's work: a root module's, where they come in at
// least kFrozenStepShare of the iterations whose module calls were
// recorded (detail windows record them in a few) for a module the loop
// does not train (frozen, or never in a training call: `trained` holds
// those with one), kTrainedStepShare for one it trains. `backward`: the
// loop's iterations (backward_iterations).
std::vector<size_t> frozen_step_calls(const Run& run, const std::vector<Span>& backward,
                                      const std::vector<Span>& forward, const std::vector<uint32_t>& roots,
                                      const std::vector<size_t>& untrained, const std::set<uint32_t>& trained) {
  std::set<size_t> recorded;
  for (const Span& f : forward) recorded.insert(iteration_of(backward, f.second));
  recorded.erase(backward.size());
  std::map<uint32_t, std::set<size_t>> iterations;  // root module -> the iterations it is called in
  for (size_t i : untrained)
    if (i < roots.size()) iterations[roots[i]].insert(iteration_of(backward, forward[i].second));
  std::set<uint32_t> step_work;
  for (auto& [m, its] : iterations) {
    its.erase(backward.size());
    const bool trains = !is_frozen(run, m) && trained.count(m) > 0;
    const double needed = (trains ? kTrainedStepShare : kFrozenStepShare) * static_cast<double>(recorded.size());
    if (!its.empty() && static_cast<double>(its.size()) >= needed) step_work.insert(m);
  }
  std::vector<size_t> calls;
  for (size_t i : untrained)
    if (i < roots.size() && step_work.count(roots[i]) > 0) calls.push_back(i);
  return calls;
}

}  // namespace

std::vector<Span> evaluation_passes(const TimelineView& tv, const std::vector<Span>& backward,
                                    const std::vector<Span>& forward, const std::vector<uint32_t>& roots,
                                    std::vector<size_t>* frozen, std::set<uint32_t>* trained_roots) {
  std::vector<Span> out;
  if (backward.empty() || forward.empty()) return out;
  const Run& run = tv.run;
  using Key = std::pair<uint64_t, int64_t>;  // (forward thread id, sequence number)
  std::set<Key> ran_backward;
  for (const OpEvent& e : run.timeline)
    if (e.kind == OpKind::kBackward && e.seq_nr >= 0) ran_backward.insert({e.forward_tid, e.seq_nr});
  // The latest-starting operator with a key made its node: an operator run
  // under no_grad peeks the same number as the next one that takes it.
  std::map<Key, int64_t> creator;
  std::vector<Span> fetches, optimizer;
  for (size_t i : tv.main_events) {
    const OpEvent& e = run.timeline[i];
    if (tv.is_data(e)) fetches.emplace_back(e.start_ns, e.end_ns);
    else if (tv.is_optimizer(e)) optimizer.emplace_back(e.start_ns, e.end_ns);
    if (e.kind != OpKind::kOperator || e.seq_nr < 0) continue;
    const Key k{e.forward_tid, e.seq_nr};
    if (ran_backward.count(k) == 0) continue;
    auto [it, inserted] = creator.try_emplace(k, e.start_ns);
    if (!inserted) it->second = std::max(it->second, e.start_ns);
  }
  std::vector<int64_t> creators;
  creators.reserve(creator.size());
  for (const auto& [k, t] : creator) creators.push_back(t);
  std::sort(creators.begin(), creators.end());
  auto trains = [&](const Span& f) {
    auto it = std::lower_bound(creators.begin(), creators.end(), f.first);
    return it != creators.end() && *it < f.second;
  };
  // Training work: its module calls, backward passes and optimizer calls,
  // sorted by start; an evaluation pass lies between two of them.
  std::vector<Span> training(backward.begin(), backward.end());
  training.insert(training.end(), optimizer.begin(), optimizer.end());
  std::vector<size_t> untrained;
  std::set<uint32_t> trained;  // root modules with a training call
  for (size_t i = 0; i < forward.size(); ++i) {
    if (!trains(forward[i])) {
      untrained.push_back(i);
      continue;
    }
    training.push_back(forward[i]);
    if (i < roots.size()) trained.insert(roots[i]);
  }
  const std::vector<size_t> step_work =
      frozen_step_calls(run, backward_iterations(backward, fetches), forward, roots, untrained, trained);
  std::vector<Span> groups;  // runs of evaluation module calls
  for (size_t i : untrained) {
    if (std::binary_search(step_work.begin(), step_work.end(), i)) training.push_back(forward[i]);
    else groups.push_back(forward[i]);
  }
  if (frozen != nullptr) *frozen = step_work;
  if (trained_roots != nullptr) *trained_roots = trained;
  if (groups.empty()) return out;
  std::sort(training.begin(), training.end());
  // Merge consecutive evaluation calls with no training work between them.
  const std::vector<Span> merged = merge_unseparated(groups, training);
  for (Span g : merged) {
    // Training work just before and just after the pass.
    auto next = std::lower_bound(training.begin(), training.end(), Span{g.second, INT64_MIN});
    const int64_t next_start = next == training.end() ? INT64_MAX : next->first;
    int64_t prev_end = INT64_MIN;
    for (const Span& t : training)
      if (t.second <= g.first) prev_end = std::max(prev_end, t.second);
    // The fetch that served the first evaluation call.
    auto f = std::lower_bound(fetches.begin(), fetches.end(), Span{g.first, INT64_MIN});
    if (f != fetches.begin() && std::prev(f)->second <= g.first && std::prev(f)->first >= prev_end)
      g.first = std::prev(f)->first;
    // The fetches after the last call (the validation loader's last one,
    // which ends its loop), except the one that starts training again.
    std::vector<Span> after;
    for (auto a = std::lower_bound(fetches.begin(), fetches.end(), Span{g.second, INT64_MIN});
         a != fetches.end() && a->first < next_start; ++a)
      after.push_back(*a);
    if (next_start != INT64_MAX && !after.empty()) after.pop_back();
    if (!after.empty()) g.second = std::max(g.second, after.back().second);
    out.push_back(g);
  }
  return out;
}

}  // namespace torchneck
