#include "analyze/flame.h"

#include <algorithm>

namespace torchneck {

const char* flame_kind_name(FlameKind kind) {
  switch (kind) {
    case FlameKind::kRoot: return "root";
    case FlameKind::kThread: return "thread";
    case FlameKind::kPython: return "python";
    case FlameKind::kOperator: return "operator";
    case FlameKind::kBackward: return "backward";
    case FlameKind::kScope: return "scope";
  }
  return "?";
}

namespace {

FlameNode& child(FlameNode& parent, FlameKind kind, const std::string& name, const std::string& file, int line) {
  for (auto& c : parent.children)
    if (c.kind == kind && c.line == line && c.name == name && c.file == file) return c;
  FlameNode n;
  n.name = name;
  n.file = file;
  n.line = line;
  n.kind = kind;
  parent.children.push_back(std::move(n));
  return parent.children.back();
}

void sort_tree(FlameNode& n) {
  std::sort(n.children.begin(), n.children.end(), [](const FlameNode& a, const FlameNode& b) {
    if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
    return a.name < b.name;
  });
  for (auto& c : n.children) sort_tree(c);
}

}  // namespace

FlameNode build_flame(const Run& run) {
  FlameNode root;
  root.name = "all";
  std::vector<uint32_t> threads;
  for (const auto& st : run.stacks)
    if (std::find(threads.begin(), threads.end(), st.thread_index) == threads.end()) threads.push_back(st.thread_index);
  const bool per_thread = threads.size() > 1;
  for (const auto& st : run.stacks) {
    FlameNode* at = &root;
    root.total_ns += st.weight_ns;
    root.samples += st.samples;
    if (per_thread) {
      const auto& ti = st.thread_index < run.threads.size() ? run.threads[st.thread_index] : ThreadInfo{};
      at = &child(*at, FlameKind::kThread, ti.name.empty() ? "thread " + std::to_string(ti.os_tid) : ti.name, "", 0);
      at->total_ns += st.weight_ns;
      at->samples += st.samples;
    }
    for (uint32_t f : st.frames) {
      if (f >= run.python.size()) continue;
      const auto& fn = run.python[f];
      at = &child(*at, FlameKind::kPython, fn.function, fn.file, fn.line);
      at->total_ns += st.weight_ns;
      at->samples += st.samples;
    }
    at->self_ns += st.weight_ns;
  }
  sort_tree(root);
  return root;
}

}  // namespace torchneck
