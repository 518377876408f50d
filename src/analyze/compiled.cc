#include "analyze/compiled.h"

#include <algorithm>
#include <string_view>

namespace torchneck {
namespace {

constexpr std::string_view kRegionPrefix = "Torch-Compiled Region";
constexpr std::string_view kCompiledForward = "CompiledFunction";
constexpr std::string_view kCompiledBackward = "CompiledFunctionBackward";
constexpr std::string_view kCompileScopeSuffix = " (dynamo_timed)";

bool starts_with(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.compare(0, p.size(), p) == 0; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// "Torch-Compiled Region: 0/1" → 1: the compilation R of frame F (F/R).
bool is_recompilation(std::string_view name) {
  const auto slash = name.rfind('/');
  if (slash == std::string_view::npos) return false;
  const std::string_view r = name.substr(slash + 1);
  return !r.empty() && std::all_of(r.begin(), r.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
         r.find_first_not_of('0') != std::string_view::npos;
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> compile_spans(const Run& run) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const OpEvent& e : run.timeline) {
    if (e.kind != OpKind::kUserScope || e.name_id >= run.strings.size()) continue;
    if (ends_with(run.strings[e.name_id], kCompileScopeSuffix)) spans.emplace_back(e.start_ns, e.end_ns);
  }
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& s : spans) {
    if (!merged.empty() && s.first <= merged.back().second) merged.back().second = std::max(merged.back().second, s.second);
    else merged.push_back(s);
  }
  return merged;
}

CompileAnalysis analyze_compiled(const Run& run, const StepAnalysis& steps) {
  CompileAnalysis c;
  for (const ModuleInfo& m : run.modules)
    if (m.compiled) c.modules.push_back(m.name);
  for (const OpStats& op : run.ops) {
    if (op.kind == OpKind::kOperator && starts_with(op.name, kRegionPrefix)) {
      c.graphs.push_back(op.name);
      c.region_calls += op.calls;
      c.recompiles += is_recompilation(op.name);
    } else if (op.kind == OpKind::kOperator && op.name == kCompiledForward) {
      c.forward_calls += op.calls;
      c.forward_ns += op.total_ns;
    } else if (op.kind == OpKind::kBackward && op.name == kCompiledBackward) {
      c.backward_calls += op.calls;
      c.backward_ns += op.total_ns;
    }
  }
  std::sort(c.graphs.begin(), c.graphs.end());
  c.graphs.erase(std::unique(c.graphs.begin(), c.graphs.end()), c.graphs.end());
  const auto spans = compile_spans(run);
  for (const auto& s : spans) c.compile_ns += s.second - s.first;
  for (size_t i = 0; i < steps.steps.size(); ++i) {
    const Step& st = steps.steps[i];
    if (std::any_of(spans.begin(), spans.end(), [&](const auto& s) { return s.first < st.end_ns && s.second > st.start_ns; }))
      c.compile_steps.push_back(i);
  }
  c.seen = !c.modules.empty() || !c.graphs.empty() || c.forward_calls > 0 || c.backward_calls > 0 || !spans.empty();
  return c;
}

}  // namespace torchneck
