#include "model/processes.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <tuple>

#include "model/op_merge.h"
#include "model/run_io.h"

namespace torchneck {
namespace {

constexpr size_t kTopFunctionsPerProcess = 5;
constexpr size_t kMaxShapesMerged = 8;

// Self time per function (index into w.python) while the worker produced
// batches, i.e. below the DataLoader fetcher's fetch(): the worker's idle
// waits (its index queue, its queue feeder and resource-sharer threads) are
// not what makes batches slow. Sample mode: the innermost frame of every
// stack that has fetch() in it. Trace mode: functions reachable from fetch()
// through the caller edges, with their whole self time. No fetch() seen
// (e.g. --python=off, or a custom loop): every function's self time.
std::vector<int64_t> busy_self_ns(const Run& w) {
  std::vector<int64_t> out(w.python.size(), 0);
  std::vector<bool> is_fetch(w.python.size(), false);
  bool any = false;
  for (size_t i = 0; i < w.python.size(); ++i) {
    const auto& f = w.python[i];
    const bool fetch = f.function == "fetch" && f.file.size() >= 8 &&
                       f.file.compare(f.file.size() - 8, 8, "fetch.py") == 0;
    is_fetch[i] = fetch;
    any = any || fetch;
  }
  if (!any) {
    for (size_t i = 0; i < w.python.size(); ++i) out[i] = w.python[i].self_ns;
    return out;
  }
  if (!w.stacks.empty()) {
    for (const auto& st : w.stacks) {
      bool below = false;
      for (uint32_t f : st.frames) below = below || is_fetch[f];
      if (below && !st.frames.empty()) out[st.frames.back()] += st.weight_ns;
    }
    return out;
  }
  std::vector<std::vector<uint32_t>> callees(w.python.size());
  for (size_t i = 0; i < w.python.size(); ++i)
    for (const auto& c : w.python[i].callers) callees[c.caller].push_back(static_cast<uint32_t>(i));
  std::vector<bool> seen(is_fetch);
  std::vector<uint32_t> todo;
  for (size_t i = 0; i < seen.size(); ++i)
    if (seen[i]) todo.push_back(static_cast<uint32_t>(i));
  while (!todo.empty()) {
    const uint32_t f = todo.back();
    todo.pop_back();
    out[f] = w.python[f].self_ns;
    for (uint32_t c : callees[f])
      if (!seen[c]) {
        seen[c] = true;
        todo.push_back(c);
      }
  }
  return out;
}

}  // namespace

std::string short_function_label(const PyFunctionStats& f) {
  if (f.builtin) return f.function;
  const size_t slash = f.file.rfind('/');
  const std::string base = slash == std::string::npos ? f.file : f.file.substr(slash + 1);
  return base + ":" + std::to_string(f.line) + "(" + f.function + ")";
}

std::vector<Run> load_worker_runs(const std::string& dir, std::vector<std::string>& notes) {
  namespace fs = std::filesystem;
  std::vector<Run> runs;
  const fs::path workers = fs::path(dir) / "workers";
  std::error_code ec;
  if (!fs::is_directory(workers, ec)) return runs;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(workers, ec))
    if (e.path().extension() == ".spill") files.push_back(e.path());
  for (const auto& f : files) {
    try {
      Run r = load_run(f.string());
      if (r.processes.empty()) throw std::runtime_error(f.string() + ": no process record");
      runs.push_back(std::move(r));
    } catch (const std::exception& e) {
      notes.push_back(std::string("worker profile left out: ") + e.what());
    }
  }
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) {
    return std::tie(a.processes[0].worker_id, a.processes[0].pid) <
           std::tie(b.processes[0].worker_id, b.processes[0].pid);
  });
  return runs;
}

void merge_worker_profiles(Run& run, const std::string& dir) {
  const bool merged = std::any_of(run.processes.begin(), run.processes.end(),
                                  [](const ProcessInfo& p) { return p.role != ProcessRole::kMain; });
  if (merged) return;
  const std::vector<Run> workers = load_worker_runs(dir, run.notes);
  ProcessInfo main = run.processes.empty() ? ProcessInfo{} : run.processes.front();
  main.role = ProcessRole::kMain;
  merge_workers(run, main, workers);
}

void merge_workers(Run& main, const ProcessInfo& main_process, const std::vector<Run>& workers) {
  main.processes.clear();
  main.worker_python.clear();
  main.worker_ops.clear();
  if (workers.empty()) return;
  main.processes.push_back(main_process);
  std::map<std::tuple<std::string, int, std::string>, size_t> index;
  OpMerger ops;
  for (const Run& w : workers) {
    ProcessInfo p = w.processes.at(0);
    const std::vector<int64_t> busy = busy_self_ns(w);
    std::vector<uint32_t> hot;
    for (uint32_t i = 0; i < w.python.size(); ++i)
      if (busy[i] > 0) hot.push_back(i);
    std::sort(hot.begin(), hot.end(), [&](uint32_t a, uint32_t b) { return busy[a] > busy[b]; });
    p.top_functions.clear();
    for (size_t i = 0; i < hot.size() && i < kTopFunctionsPerProcess; ++i)
      p.top_functions.push_back(short_function_label(w.python[hot[i]]));
    p.op_calls = 0;
    for (const auto& o : w.ops)
      if (o.kind == OpKind::kOperator) p.op_calls += o.calls;
    p.python_samples = w.python_samples;
    main.processes.push_back(std::move(p));

    for (uint32_t i : hot) {
      const auto& f = w.python[i];
      const auto key = std::make_tuple(f.file, f.line, f.function);
      auto it = index.find(key);
      if (it == index.end()) {
        it = index.emplace(key, main.worker_python.size()).first;
        PyFunctionStats m = f;
        m.callers.clear();  // caller indices are per process
        m.calls = m.primitive_calls = m.self_samples = m.total_samples = 0;
        m.self_ns = m.total_ns = 0;
        main.worker_python.push_back(std::move(m));
      }
      PyFunctionStats& m = main.worker_python[it->second];
      m.calls += f.calls;
      m.primitive_calls += f.primitive_calls;
      m.self_ns += busy[i];
      m.total_ns += f.total_ns;
      m.self_samples += f.self_samples;
      m.total_samples += f.total_samples;
    }
    for (const auto& o : w.ops) {
      ops.add(o.name, o.kind, 0, o.calls, o.self_ns, o.total_ns);
      for (const auto& s : o.shapes) ops.add_shapes(o.name, o.kind, s.shapes, s.count);
    }
  }
  std::sort(main.worker_python.begin(), main.worker_python.end(),
            [](const PyFunctionStats& a, const PyFunctionStats& b) { return a.self_ns > b.self_ns; });
  ops.finish(main.worker_ops, kMaxShapesMerged);
  for (auto& o : main.worker_ops) o.thread_indices.clear();  // not this process's threads
}

int64_t peak_alive_workers(const std::vector<ProcessInfo>& processes) {
  std::vector<std::pair<int64_t, int>> edges;  // (time, +1 born / -1 gone); a death sorts before a birth
  int64_t unknown = 0;
  for (const ProcessInfo& p : processes) {
    if (p.role == ProcessRole::kMain) continue;
    if (p.start_ns <= 0) {
      ++unknown;
      continue;
    }
    edges.emplace_back(p.start_ns, +1);
    edges.emplace_back(p.start_ns + static_cast<int64_t>(p.wall_s * 1e9), -1);
  }
  std::sort(edges.begin(), edges.end());
  int64_t alive = 0, peak = 0;
  for (const auto& [t, delta] : edges) peak = std::max(peak, alive += delta);
  return peak + unknown;
}

}  // namespace torchneck
