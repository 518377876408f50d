#include "analyze/gpu/live_window.h"

#include "analyze/gpu/gpu_analysis.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

namespace torchneck::gpu {

std::vector<GpuLaunch> gpu_launches(const Run& live, const Activities& window) {
  std::unordered_map<int64_t, int64_t> device_ns;  // correlation -> device time
  for (const Activity& e : window.events)
    if (is_gpu_work(e.cat) && e.correlation >= 0) device_ns[e.correlation] += e.dur_ns;
  std::unordered_map<uint64_t, uint32_t> thread_of;  // Linux tid -> thread index
  for (size_t i = 0; i < live.threads.size(); ++i) thread_of.emplace(live.threads[i].os_tid, static_cast<uint32_t>(i));
  std::vector<GpuLaunch> out;
  for (const Activity& e : window.events) {
    if ((e.cat != ActivityKind::kRuntime && e.cat != ActivityKind::kDriver) || e.correlation < 0) continue;
    auto d = device_ns.find(e.correlation);
    if (d == device_ns.end()) continue;
    auto t = thread_of.find(static_cast<uint64_t>(e.tid));
    if (t == thread_of.end()) continue;
    out.push_back({t->second, e.ts_ns, d->second});
  }
  return out;
}

namespace {

int64_t median(std::vector<int64_t>& v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

Alignment align_window(const Run& live, const Activities& window, size_t max_ops) {
  Alignment out;
  // The live timeline's operator starts by (thread, name), sorted.
  std::unordered_map<uint64_t, uint32_t> thread_of;
  for (size_t i = 0; i < live.threads.size(); ++i) thread_of.emplace(live.threads[i].os_tid, static_cast<uint32_t>(i));
  std::unordered_map<std::string, uint32_t> name_of;  // live name -> name id
  for (size_t i = 0; i < live.strings.size(); ++i) name_of.emplace(live.strings[i], static_cast<uint32_t>(i));
  std::map<std::pair<uint32_t, uint32_t>, std::vector<int64_t>> starts;
  for (const OpEvent& e : live.timeline)
    if (e.kind == OpKind::kOperator) starts[{e.thread_index, e.name_id}].push_back(e.start_ns);
  for (auto& [key, v] : starts) std::sort(v.begin(), v.end());
  std::vector<int64_t> diffs;
  size_t seen = 0;
  for (const Activity& e : window.events) {
    if (e.cat != ActivityKind::kCpuOp) continue;
    if (seen++ >= max_ops) break;
    auto t = thread_of.find(static_cast<uint64_t>(e.tid));
    auto n = name_of.find(window.name_of(e));
    if (t == thread_of.end() || n == name_of.end()) continue;
    auto s = starts.find({t->second, n->second});
    if (s == starts.end()) continue;
    const std::vector<int64_t>& v = s->second;
    auto it = std::lower_bound(v.begin(), v.end(), e.ts_ns);
    int64_t best = INT64_MAX;
    if (it != v.end()) best = *it - e.ts_ns;
    if (it != v.begin() && std::llabs(*std::prev(it) - e.ts_ns) < std::llabs(best)) best = *std::prev(it) - e.ts_ns;
    if (best != INT64_MAX) diffs.push_back(best);
  }
  out.matched = diffs.size();
  if (diffs.empty()) return out;
  out.correction_ns = median(diffs);
  for (int64_t& d : diffs) d = std::llabs(d - out.correction_ns);
  out.residual_ns = median(diffs);
  return out;
}

namespace {

// A frame of the user's code: not torch's, not the interpreter's standard
// library, not torchneck's, not a built-in.
bool user_frame(const PyFunctionStats& f) {
  if (f.builtin || f.file == "~" || f.file.empty() || f.file[0] == '<') return false;
  for (const char* lib : {"/torch/", "/torchneck/", "/lib/python3", "/site-packages/", "/dist-packages/"})
    if (f.file.find(lib) != std::string::npos) return false;
  return true;
}

std::string short_where(const PyFunctionStats& f) {
  const auto slash = f.file.rfind('/');
  return (slash == std::string::npos ? f.file : f.file.substr(slash + 1)) + ":" + std::to_string(f.line) + "(" +
         f.function + ")";
}

}  // namespace

std::vector<SyncSite> sync_sites(const Run& live, const Activities& window) {
  std::unordered_map<uint64_t, uint32_t> thread_of;
  for (size_t i = 0; i < live.threads.size(); ++i) thread_of.emplace(live.threads[i].os_tid, static_cast<uint32_t>(i));
  // The kept samples by thread, in time order.
  std::unordered_map<uint32_t, std::vector<const PySample*>> by_thread;
  for (const PySample& p : live.samples)
    if (p.stack != PySample::kNoStack && p.stack < live.stacks.size()) by_thread[p.thread_index].push_back(&p);
  for (auto& [t, v] : by_thread)
    std::stable_sort(v.begin(), v.end(), [](const PySample* a, const PySample* b) { return a->t_ns < b->t_ns; });
  std::map<std::string, SyncSite> sites;
  for (const Activity& e : window.events) {
    if (e.cat != ActivityKind::kRuntime || !synchronising_call(window.name_of(e))) continue;
    auto t = thread_of.find(static_cast<uint64_t>(e.tid));
    if (t == thread_of.end()) continue;
    auto s = by_thread.find(t->second);
    if (s == by_thread.end()) continue;
    const auto& v = s->second;
    // The sample nearest to the call's middle.
    const int64_t mid = e.ts_ns + e.dur_ns / 2;
    auto it = std::lower_bound(v.begin(), v.end(), mid, [](const PySample* p, int64_t x) { return p->t_ns < x; });
    const PySample* best = nullptr;
    if (it != v.end()) best = *it;
    if (it != v.begin() && (best == nullptr || mid - (*std::prev(it))->t_ns < best->t_ns - mid)) best = *std::prev(it);
    if (best == nullptr || std::llabs(best->t_ns - mid) > kSyncSampleReachNs + e.dur_ns / 2) continue;
    const std::vector<uint32_t>& frames = live.stacks[best->stack].frames;  // outermost -> innermost
    for (size_t k = frames.size(); k-- > 0;) {
      if (frames[k] >= live.python.size() || !user_frame(live.python[frames[k]])) continue;
      SyncSite& site = sites[short_where(live.python[frames[k]])];
      site.where = short_where(live.python[frames[k]]);
      ++site.calls;
      site.total_ns += e.dur_ns;
      break;
    }
  }
  std::vector<SyncSite> out;
  for (auto& [k, v] : sites) out.push_back(std::move(v));
  std::sort(out.begin(), out.end(), [](const SyncSite& a, const SyncSite& b) { return a.total_ns > b.total_ns; });
  return out;
}

namespace {

using Intervals = std::vector<std::pair<int64_t, int64_t>>;

// Sorted, merged.
Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& x : v) {
    if (x.second <= x.first) continue;
    if (!out.empty() && x.first <= out.back().second) out.back().second = std::max(out.back().second, x.second);
    else out.push_back(x);
  }
  return out;
}

// The parts of merged `v` inside [a, b).
Intervals clip(const Intervals& v, int64_t a, int64_t b) {
  Intervals out;
  auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(a, INT64_MIN));
  if (it != v.begin()) --it;
  for (; it != v.end() && it->first < b; ++it) {
    const int64_t x = std::max(it->first, a), y = std::min(it->second, b);
    if (y > x) out.emplace_back(x, y);
  }
  return out;
}

int64_t measure(const Intervals& v) {
  int64_t n = 0;
  for (const auto& x : v) n += x.second - x.first;
  return n;
}

}  // namespace

std::vector<WindowStepGpu> window_step_gpu(const Run& live, const StepAnalysis& steps, const Activities& window) {
  Intervals device, data;
  for (const Activity& e : window.events)
    if (is_gpu_work(e.cat)) device.emplace_back(e.ts_ns, e.end_ns());
  device = merged(std::move(device));
  for (const OpEvent& e : live.timeline)
    if (e.kind == OpKind::kUserScope && e.thread_index == live.main_thread && e.name_id < live.strings.size() &&
        live.strings[e.name_id].rfind("enumerate(DataLoader)", 0) == 0)
      data.emplace_back(e.start_ns, e.end_ns);
  data = merged(std::move(data));
  std::vector<WindowStepGpu> out;
  for (size_t i = 0; i < steps.steps.size(); ++i) {
    const Step& st = steps.steps[i];
    if (!st.gpu_window) continue;
    WindowStepGpu w;
    w.step = i;
    w.step_ns = st.duration();
    const Intervals busy = clip(device, st.start_ns, st.end_ns);
    w.busy_ns = measure(busy);
    // Idle = the step less the busy parts; of it, what lies in a fetch.
    Intervals idle;
    int64_t at = st.start_ns;
    for (const auto& b : busy) {
      if (b.first > at) idle.emplace_back(at, b.first);
      at = std::max(at, b.second);
    }
    if (st.end_ns > at) idle.emplace_back(at, st.end_ns);
    for (const auto& x : idle) w.idle_data_ns += measure(clip(data, x.first, x.second));
    w.idle_cpu_ns = w.step_ns - w.busy_ns - w.idle_data_ns;
    out.push_back(w);
  }
  return out;
}

void shift_activities(Activities& a, int64_t offset_ns) {
  for (Activity& e : a.events) e.ts_ns += offset_ns;
  for (ActivityFlow& f : a.flows) f.ts_ns += offset_ns;
  for (CounterSeries& c : a.counters)
    for (CounterSample& p : c.samples) p.t_ns += offset_ns;
}

}  // namespace torchneck::gpu
