#include "model/op_merge.h"

#include <algorithm>

namespace torchneck {
namespace {

bool more_frequent(const ShapeCount& a, const ShapeCount& b) {
  return a.count != b.count ? a.count > b.count : a.shapes < b.shapes;
}

void bound_shapes(std::vector<ShapeCount>& out, size_t max_shapes) {
  std::sort(out.begin(), out.end(), more_frequent);
  if (out.size() <= max_shapes) return;
  const size_t keep = max_shapes == 0 ? 0 : max_shapes - 1;
  uint64_t rest = 0;
  for (size_t i = keep; i < out.size(); ++i) rest += out[i].count;
  out.resize(keep);
  if (max_shapes == 0) return;
  auto it = std::find_if(out.begin(), out.end(),
                         [](const ShapeCount& s) { return s.shapes == kOtherShapes; });
  if (it != out.end()) {
    it->count += rest;
  } else {
    out.push_back(ShapeCount{kOtherShapes, rest});
  }
  std::sort(out.begin(), out.end(), more_frequent);
}

}  // namespace

OpMerger::Merged& OpMerger::entry(std::string_view name, OpKind kind) {
  std::string key(1, static_cast<char>('0' + static_cast<int>(kind)));
  key.append(name);
  auto [it, inserted] = index_.emplace(std::move(key), merged_.size());
  if (inserted) {
    merged_.emplace_back();
    merged_.back().stats.name = std::string(name);
    merged_.back().stats.kind = kind;
  }
  return merged_[it->second];
}

void OpMerger::add(std::string_view name, OpKind kind, uint32_t thread_index, uint64_t calls,
                   int64_t self_ns, int64_t total_ns) {
  Merged& m = entry(name, kind);
  m.stats.calls += calls;
  m.stats.self_ns += self_ns;
  m.stats.total_ns += total_ns;
  if (calls > 0) m.stats.thread_indices.push_back(thread_index);
}

void OpMerger::add_shapes(std::string_view name, OpKind kind, std::string_view shapes,
                          uint64_t count) {
  entry(name, kind).shapes[std::string(shapes)] += count;
}

void OpMerger::finish(std::vector<OpStats>& out, size_t max_shapes) {
  const size_t first = out.size();
  for (Merged& m : merged_) {
    // An op seen only by the sampled shape callback (its end fell after
    // stop) has no calls: its shapes alone would be noise.
    if (m.stats.calls == 0) continue;
    auto& threads = m.stats.thread_indices;
    std::sort(threads.begin(), threads.end());
    threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
    for (auto& [text, count] : m.shapes) m.stats.shapes.push_back(ShapeCount{text, count});
    bound_shapes(m.stats.shapes, max_shapes);
    out.push_back(std::move(m.stats));
  }
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
            [](const OpStats& a, const OpStats& b) {
              if (a.self_ns != b.self_ns) return a.self_ns > b.self_ns;
              if (a.name != b.name) return a.name < b.name;
              return a.kind < b.kind;
            });
  merged_.clear();
  index_.clear();
}

}  // namespace torchneck
