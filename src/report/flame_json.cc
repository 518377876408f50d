#include "report/flame_json.h"

#include <algorithm>
#include <functional>

#include "report/json_writer.h"

namespace torchneck {

namespace {

struct Writer {
  JsonWriter w;
  int64_t min_ns = 0;
  size_t budget = 0;
  size_t omitted = 0;        // counted while writing
  size_t omitted_total = 0;  // from a first pass, for the root's field

  void node(const FlameNode& n, bool is_root) {
    w.begin_object();
    w.field("name", n.name);
    w.field("kind", flame_kind_name(n.kind));
    if (!n.file.empty()) {
      w.field("file", n.file);
      w.field("line", n.line);
    }
    w.field("value", n.total_ns);
    int64_t self = n.self_ns;
    std::vector<const FlameNode*> kept;
    for (const auto& c : n.children) {
      if (c.total_ns >= min_ns && budget > 0) {
        --budget;
        kept.push_back(&c);
      } else {
        self += c.total_ns;
        omitted += 1 + count(c);
      }
    }
    w.field("self", self);
    if (is_root) w.field("omitted_nodes", static_cast<uint64_t>(omitted_total));
    w.key("children").begin_array();
    for (const FlameNode* c : kept) node(*c, false);
    w.end_array();
    w.end_object();
  }
  static size_t count(const FlameNode& n) {
    size_t k = 0;
    for (const auto& c : n.children) k += 1 + count(c);
    return k;
  }
};

}  // namespace

std::string flame_json(const FlameNode& root, double min_share, size_t max_nodes) {
  // Which nodes fit: the heaviest max_nodes of those above min_share, chosen
  // breadth-first by weight so a kept node's parent is always kept.
  Writer wr;
  wr.min_ns = static_cast<int64_t>(static_cast<double>(root.total_ns) * min_share);
  if (wr.min_ns < 1) wr.min_ns = 1;
  // The threshold that keeps at most max_nodes nodes: the max_nodes-th
  // largest total among nodes above min_ns (totals shrink with depth).
  std::vector<int64_t> totals;
  std::vector<const FlameNode*> todo{&root};
  while (!todo.empty()) {
    const FlameNode* n = todo.back();
    todo.pop_back();
    for (const auto& c : n->children)
      if (c.total_ns >= wr.min_ns) {
        totals.push_back(c.total_ns);
        todo.push_back(&c);
      }
  }
  if (totals.size() > max_nodes && max_nodes > 0) {
    std::nth_element(totals.begin(), totals.begin() + static_cast<std::ptrdiff_t>(max_nodes - 1), totals.end(),
                     std::greater<int64_t>());
    wr.min_ns = std::max(wr.min_ns, totals[max_nodes - 1]);
  }
  Writer count = wr;  // a first pass counts what is left out
  count.budget = max_nodes;
  count.node(root, true);
  wr.budget = max_nodes;
  wr.omitted_total = count.omitted;
  wr.node(root, true);
  return wr.w.str();
}

}  // namespace torchneck
