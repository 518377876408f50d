#include "analyze/gpu/gpu_window.h"

#include "analyze/gpu/gpu_analysis.h"
#include "core/stats.h"

#include <algorithm>
#include <cmath>
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

// The offset alone is kept where it leaves less than this: the usual case
// (Kineto's and our operators' starts a few tens of ns apart), which the
// line could only move by noise.
constexpr int64_t kOffsetEnoughNs = 1000;
// Bins of the tracked matches: at least this many operators each, and at
// most kAlignBins of them (a stretch that reaches one bin from the line of
// the bins before it is 1/kAlignBins of the window's).
constexpr size_t kMinBinOps = 32;
constexpr size_t kAlignBins = 32;

// A Kineto operator with the live starts of its name on its thread.
struct KinetoOp {
  int64_t ts_ns;
  const std::vector<int64_t>* live;
};

// live = kineto + c + b * (kineto - origin)
struct Line {
  int64_t origin = 0;
  double c = 0.0, b = 0.0;
  int64_t at(int64_t t) const {
    return t + static_cast<int64_t>(std::llround(c + b * static_cast<double>(t - origin)));
  }
};

// The live start nearest to x, as live - x; INT64_MAX when there is none.
int64_t nearest(const std::vector<int64_t>& v, int64_t x) {
  auto it = std::lower_bound(v.begin(), v.end(), x);
  int64_t best = INT64_MAX;
  if (it != v.end()) best = *it - x;
  if (it != v.begin() && std::llabs(*std::prev(it) - x) < std::llabs(best)) best = *std::prev(it) - x;
  return best;
}

// Each operator of [first, last) against the live starts nearest to where
// the line puts it: live - line(kineto).
void residuals(const std::vector<KinetoOp>& ops, size_t first, size_t last, const Line& l, std::vector<int64_t>& out) {
  out.clear();
  for (size_t i = first; i < last; ++i) {
    const int64_t d = nearest(*ops[i].live, l.at(ops[i].ts_ns));
    if (d != INT64_MAX) out.push_back(d);
  }
}

// Least squares through (x, y) points, x from the origin.
void fit(const std::vector<std::pair<double, double>>& pts, Line& l) {
  if (pts.size() == 1) {
    l.c = pts[0].second;
    l.b = 0.0;
    return;
  }
  double mx = 0, my = 0;
  for (const auto& [x, y] : pts) mx += x, my += y;
  mx /= static_cast<double>(pts.size());
  my /= static_cast<double>(pts.size());
  double sxx = 0, sxy = 0;
  for (const auto& [x, y] : pts) sxx += (x - mx) * (x - mx), sxy += (x - mx) * (y - my);
  l.b = sxx > 0 ? sxy / sxx : 0.0;
  l.c = my - l.b * mx;
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
  std::vector<KinetoOp> ops;
  size_t seen = 0;
  for (const Activity& e : window.events) {
    if (e.cat != ActivityKind::kCpuOp) continue;
    if (seen++ >= max_ops) break;
    auto t = thread_of.find(static_cast<uint64_t>(e.tid));
    auto n = name_of.find(window.name_of(e));
    if (t == thread_of.end() || n == name_of.end()) continue;
    auto s = starts.find({t->second, n->second});
    if (s == starts.end() || s->second.empty()) continue;
    ops.push_back({e.ts_ns, &s->second});
  }
  std::stable_sort(ops.begin(), ops.end(), [](const KinetoOp& a, const KinetoOp& b) { return a.ts_ns < b.ts_ns; });
  if (ops.empty()) return out;
  out.matched = ops.size();
  out.origin_ns = ops.front().ts_ns;
  // The offset alone: the median over every match.
  std::vector<int64_t> r;
  Line flat;
  flat.origin = out.origin_ns;
  residuals(ops, 0, ops.size(), flat, r);
  flat.c = static_cast<double>(middle_value(r));
  for (int64_t& d : r) d = std::llabs(d - static_cast<int64_t>(flat.c));
  out.correction_ns = static_cast<int64_t>(flat.c);
  out.residual_ns = middle_value(r);
  if (out.residual_ns <= kOffsetEnoughNs) return out;
  // A line, tracked bin by bin in time order.
  const size_t bin = std::max(kMinBinOps, (ops.size() + kAlignBins - 1) / kAlignBins);
  Line line = flat;
  line.c = 0.0;  // the first bin from the clocks' offset alone: its span is short
  std::vector<std::pair<double, double>> pts;
  for (size_t first = 0; first < ops.size(); first += bin) {
    const size_t last = std::min(ops.size(), first + bin);
    residuals(ops, first, last, line, r);
    if (r.empty()) continue;
    const int64_t t = ops[first + (last - first) / 2].ts_ns;
    const double x = static_cast<double>(t - line.origin);
    pts.emplace_back(x, line.c + line.b * x + static_cast<double>(middle_value(r)));
    fit(pts, line);
  }
  // Then refined on every match the line now pairs (twice: a refit may
  // pair a few more), leaving out those further from it than a few times
  // the median distance: the bins' medians carry the tracking's error.
  for (int pass = 0; pass < 2 && std::fabs(line.b) <= kMaxClockStretch; ++pass) {
    residuals(ops, 0, ops.size(), line, r);
    if (r.empty()) break;
    std::vector<int64_t> dist(r.size());
    for (size_t i = 0; i < r.size(); ++i) dist[i] = std::llabs(r[i]);
    const int64_t reach = std::max<int64_t>(kOffsetEnoughNs, 4 * middle_value(dist));
    pts.clear();
    for (const KinetoOp& op : ops) {
      const int64_t d = nearest(*op.live, line.at(op.ts_ns));
      if (d == INT64_MAX || std::llabs(d) > reach) continue;
      const double x = static_cast<double>(op.ts_ns - line.origin);
      pts.emplace_back(x, line.c + line.b * x + static_cast<double>(d));
    }
    if (pts.size() >= 2) fit(pts, line);
  }
  residuals(ops, 0, ops.size(), line, r);
  if (r.empty() || std::fabs(line.b) > kMaxClockStretch) return out;
  line.c += static_cast<double>(middle_value(r));
  residuals(ops, 0, ops.size(), line, r);
  for (int64_t& d : r) d = std::llabs(d);
  const int64_t left = middle_value(r);
  if (left >= out.residual_ns) return out;
  out.correction_ns = std::llround(line.c);
  out.stretch = line.b;
  out.residual_ns = left;
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

void align_activities(Activities& a, const Alignment& al) {
  Line l;
  l.origin = al.origin_ns;
  l.c = static_cast<double>(al.correction_ns);
  l.b = al.stretch;
  for (Activity& e : a.events) {
    const int64_t end = l.at(e.ts_ns + e.dur_ns);
    e.ts_ns = l.at(e.ts_ns);
    e.dur_ns = std::max<int64_t>(0, end - e.ts_ns);
  }
  for (ActivityFlow& f : a.flows) f.ts_ns = l.at(f.ts_ns);
  for (CounterSeries& c : a.counters)
    for (CounterSample& p : c.samples) p.t_ns = l.at(p.t_ns);
}

void shift_activities(Activities& a, int64_t offset_ns) {
  for (Activity& e : a.events) e.ts_ns += offset_ns;
  for (ActivityFlow& f : a.flows) f.ts_ns += offset_ns;
  for (CounterSeries& c : a.counters)
    for (CounterSample& p : c.samples) p.t_ns += offset_ns;
}

}  // namespace torchneck::gpu
