#include "analyze/summary.h"

#include <algorithm>

namespace torchneck {
namespace {

// Top `n` indices of `items` passing `keep`, by descending `key`; ties by
// name so the order is deterministic.
template <typename T, typename Keep, typename Key, typename Name>
std::vector<size_t> top_by(const std::vector<T>& items, size_t n, Keep keep, Key key, Name name) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < items.size(); ++i)
    if (keep(items[i])) idx.push_back(i);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const auto ka = key(items[a]), kb = key(items[b]);
    if (ka != kb) return ka > kb;
    return name(items[a]) < name(items[b]);
  });
  if (idx.size() > n) idx.resize(n);
  return idx;
}

}  // namespace

double share(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

Summary summarize(const Run& run, const SummaryOptions& options) {
  Summary s;
  for (const auto& f : run.python) s.python_self_ns += f.self_ns;
  for (const auto& op : run.ops) {
    if (op.kind == OpKind::kOperator) {
      s.op_self_ns += op.self_ns;
      s.op_calls += op.calls;
    } else if (op.kind == OpKind::kBackward) {
      s.backward_self_ns += op.self_ns;
    }
  }
  auto fname = [](const PyFunctionStats& f) { return f.function; };
  s.top_python = top_by(
      run.python, options.top_python, [](const PyFunctionStats&) { return true; },
      [](const PyFunctionStats& f) { return f.self_ns; }, fname);
  auto oname = [](const OpStats& o) { return o.name; };
  auto oself = [](const OpStats& o) { return o.self_ns; };
  auto kind_is = [](OpKind k) { return [k](const OpStats& o) { return o.kind == k; }; };
  s.top_ops = top_by(run.ops, options.top_ops, kind_is(OpKind::kOperator), oself, oname);
  s.top_backward = top_by(run.ops, options.top_backward, kind_is(OpKind::kBackward),
                          [](const OpStats& o) { return o.total_ns; }, oname);
  s.top_scopes = top_by(run.ops, options.top_scopes, kind_is(OpKind::kUserScope),
                        [](const OpStats& o) { return o.total_ns; }, oname);
  return s;
}

}  // namespace torchneck
