// The TensorBoard plugin's Overview and GPU Summary (see tbplugin.h; its
// kernel and operator tables are in tbplugin_tables.cc). "Plugin" below is pytorch/kineto at 94979607^,
// tb_plugin/torch_tb_profiler/profiler/; each piece names the function it
// mirrors. Where the plugin's Python does something odd, we keep it (noted),
// since the point is to give the numbers users saw in TensorBoard.
#include "analyze/gpu/tbplugin.h"
#include "analyze/gpu/tbplugin_internal.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace torchneck::gpu {

using Cat = ActivityKind;
using Event = Activity;
using Trace = Activities;

const char* tb_role_name(TbRole r) {
  switch (r) {
    case TbRole::kKernel: return "Kernel";
    case TbRole::kMemcpy: return "Memcpy";
    case TbRole::kMemset: return "Memset";
    case TbRole::kCommunication: return "Communication";
    case TbRole::kRuntime: return "Runtime";
    case TbRole::kDataLoader: return "DataLoader";
    case TbRole::kCpuExec: return "CPU Exec";
    case TbRole::kOther: return "Other";
  }
  return "?";
}

namespace tb_detail {

bool starts_with(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.compare(0, p.size(), p) == 0; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// trace.py EventTypes, as create_trace_event assigns them from "cat"
// (EventTypeMap) and the name ("ProfilerStep#" under cpu_op/Operator or
// (gpu_)user_annotation -> ProfilerStepEvent). Categories not in EventTypeMap
// (cuda_driver, cuda_sync, anything else) give no event at all.

Ty type_of(const Trace& t, const Event& e) {
  switch (e.cat) {
    case Cat::kCpuOp: return starts_with(t.name_of(e), "ProfilerStep#") ? Ty::kProfilerStep : Ty::kOperator;
    // EventTypeMap maps both 'user_annotation' and 'gpu_user_annotation' to USER_ANNOTATION.
    case Cat::kUserAnnotation:
    case Cat::kGpuUserAnnotation:
      return starts_with(t.name_of(e), "ProfilerStep#") ? Ty::kProfilerStep : Ty::kUserAnnotation;
    case Cat::kRuntime: return Ty::kRuntime;
    case Cat::kKernel: return Ty::kKernel;
    case Cat::kMemcpy: return Ty::kMemcpy;
    case Cat::kMemset: return Ty::kMemset;
    case Cat::kPythonFunction: return Ty::kPythonFunction;
    case Cat::kTrace: return Ty::kTrace;
    default: return Ty::kNone;
  }
}

// trace.py NcclOpNameSet, GlooOpNameSet.
bool is_comm_op_name(std::string_view n) {
  static constexpr std::string_view kNames[] = {
      "nccl:broadcast", "nccl:reduce", "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter",
      "gloo:broadcast", "gloo:reduce", "gloo:all_reduce", "gloo:all_gather", "gloo:reduce_scatter"};
  for (auto k : kNames)
    if (n == k) return true;
  return false;
}

// event_parser.py StepParser._parse_step (and node.py create_operator_node):
// a DataLoader range is an op or user annotation named
// "enumerate(DataLoader)#...__next__" or "enumerate(DataPipe)#...".
bool is_dataloader_name(std::string_view n) {
  return (starts_with(n, "enumerate(DataLoader)#") && ends_with(n, ".__next__")) ||
         starts_with(n, "enumerate(DataPipe)#");
}

// ---- event_parser.py: EventParser.parse (the parts the Overview needs) --

// NodeParserMixin._parse_node: runtime <-> device work by correlation id,
// in event order: device work seen before its runtime waits in
// corrid_to_device and is taken by the runtime; after, it is appended to the
// last runtime with that correlation. Each device node belongs to at most
// one runtime; a device node is "matched" to a step iff its runtime is.

std::vector<Ty> types_of(const Trace& t) {
  std::vector<Ty> ty(t.events.size());
  for (size_t i = 0; i < ty.size(); ++i) ty[i] = type_of(t, t.events[i]);
  return ty;
}

// NodeParserMixin._parse_node: communication_data is keyed by the External
// id of every op / user annotation / ProfilerStep named like a NCCL or Gloo
// collective; a kernel whose external id is one of these is Communication
// (StepParser._parse_step). -1 stands for Python's None, and matches like it.
std::unordered_set<int64_t> comm_external_ids(const Trace& t, const std::vector<Ty>& types) {
  std::unordered_set<int64_t> ids;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Ty ty = types[i];
    if ((ty == Ty::kOperator || ty == Ty::kUserAnnotation || ty == Ty::kProfilerStep) &&
        is_comm_op_name(t.name_of(t.events[i])))
      ids.insert(t.events[i].external_id);
  }
  return ids;
}

Correlated correlate(const Trace& t, const std::vector<Ty>& types) {
  Correlated c;
  std::unordered_map<int64_t, std::vector<uint32_t>> corr_to_device;
  std::unordered_map<int64_t, uint32_t> corr_to_runtime;
  auto attach = [&](uint32_t rt, uint32_t d) {
    auto& r = c.rts[rt];
    r.dev_min = std::min(r.dev_min, c.devs[d].start);
    r.dev_max = std::max(r.dev_max, c.devs[d].end);
    r.devs.push_back(d);
    c.devs[d].owner = static_cast<int32_t>(rt);
  };
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    const Ty ty = types[i];
    if (ty == Ty::kKernel || ty == Ty::kMemcpy || ty == Ty::kMemset) {
      const auto d = static_cast<uint32_t>(c.devs.size());
      c.devs.push_back({e.ts_ns, e.end_ns(), static_cast<uint32_t>(i)});
      auto it = corr_to_runtime.find(e.correlation);
      if (it != corr_to_runtime.end()) attach(it->second, d);
      else corr_to_device[e.correlation].push_back(d);
    } else if (ty == Ty::kRuntime) {
      const auto r = static_cast<uint32_t>(c.rts.size());
      c.rts.push_back({e.ts_ns, e.end_ns(), e.external_id, e.tid, kMax, kMin, {}});
      auto it = corr_to_device.find(e.correlation);
      if (it != corr_to_device.end()) {
        for (uint32_t d : it->second) attach(r, d);
        corr_to_device.erase(it);
      }
      corr_to_runtime[e.correlation] = r;
    }
  }
  return c;
}

struct Parsed {
  std::array<Ranges, kTbRoleCount - 1> role_ranges;  // StepParser.role_ranges, merged
  Ranges steps;                                       // after update_device_steps
  std::vector<std::string> step_names;
  int removed_tail = 0;
  int64_t global_start = kMax, global_end = kMin;  // StepParser.global_start_ts / global_end_ts
  bool valid = false;                               // at least one step with start <= end
};

// ProfilerStepEvent.step = int(name.split('#')[1]); str() of it.
std::string step_name_of(const std::string& name) {
  std::string_view num = std::string_view(name).substr(name.find('#') + 1);
  num = num.substr(0, num.find('#'));
  size_t j = 0;
  const bool neg = !num.empty() && num[0] == '-';
  if (neg || (!num.empty() && num[0] == '+')) j = 1;
  while (j + 1 < num.size() && num[j] == '0') ++j;  // int('05') == 5
  std::string s(num.substr(j));
  return neg && s != "0" ? "-" + s : s;
}

// StepParser.parse_steps / _parse_step: role ranges, host steps, host and
// global min / max. Returns the host side's span (PYTHON, OPERATOR,
// PROFILER_STEP; not user annotations).
Range read_roles_and_steps(const Trace& t, const std::vector<Ty>& types, Parsed& p) {
  const std::unordered_set<int64_t> comm_ext = comm_external_ids(t, types);
  std::array<Ranges, kTbRoleCount - 1> roles;
  auto add = [&](TbRole r, const Event& e) { roles[static_cast<int>(r)].emplace_back(e.ts_ns, e.end_ns()); };
  int64_t cpu_min = kMax, cpu_max = kMin, global_min = kMax, global_max = kMin;
  int64_t trace_start = kMax, trace_end = kMin;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    const Ty ty = types[i];
    if (ty == Ty::kNone) continue;
    const std::string& name = t.name_of(e);
    switch (ty) {
      case Ty::kKernel: add(comm_ext.count(e.external_id) ? TbRole::kCommunication : TbRole::kKernel, e); break;
      case Ty::kMemcpy: add(TbRole::kMemcpy, e); break;
      case Ty::kMemset: add(TbRole::kMemset, e); break;
      case Ty::kRuntime: add(TbRole::kRuntime, e); break;
      case Ty::kOperator:
      case Ty::kUserAnnotation:
        if (is_dataloader_name(name)) add(TbRole::kDataLoader, e);
        else if (is_comm_op_name(name)) add(TbRole::kCommunication, e);
        else add(TbRole::kCpuExec, e);  // every other op / annotation is "CPU Exec"
        break;
      case Ty::kProfilerStep:
        p.steps.emplace_back(e.ts_ns, e.end_ns());
        p.step_names.push_back(step_name_of(name));
        break;
      default: break;
    }
    if (ty == Ty::kOperator || ty == Ty::kProfilerStep) {
      cpu_min = std::min(cpu_min, e.ts_ns);
      cpu_max = std::max(cpu_max, e.end_ns());
    }
    global_min = std::min(global_min, e.ts_ns);
    global_max = std::max(global_max, e.end_ns());
    if (ty == Ty::kTrace && name == "PyTorch Profiler (0)") {
      trace_start = e.ts_ns;
      trace_end = e.end_ns();
    }
  }
  p.global_start = trace_start != kMax ? trace_start : global_min;
  p.global_end = trace_end != kMin ? trace_end : global_max;
  for (size_t i = 0; i < roles.size(); ++i) p.role_ranges[i] = merge_ranges(std::move(roles[i]));
  return {cpu_min, cpu_max};
}

// What each host step launched on the device (StepParser._find_device_steps).
struct DeviceSteps {
  std::vector<Range> spans;             // per step: its device work's span, {kMax, kMin} for none
  std::vector<int64_t> matched_count;   // per step: device nodes of the runtimes inside it
  std::vector<char> rt_matched;         // per runtime: inside some step
  bool any_matched = false;
};

// A two-way merge of the runtimes (by start) with the host steps; a runtime
// wholly inside a step extends that step's device span to its device nodes.
DeviceSteps find_device_steps(const Ranges& steps, const std::vector<Correlated::Rt>& rts) {
  const size_t n_steps = steps.size();
  DeviceSteps d{std::vector<Range>(n_steps, {kMax, kMin}), std::vector<int64_t>(n_steps, 0),
                std::vector<char>(rts.size(), 0), false};
  std::vector<uint32_t> order(rts.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return rts[a].start < rts[b].start; });
  size_t i_step = 0, i_rt = 0;
  int64_t dmin = kMax, dmax = kMin;
  while (i_step < n_steps && i_rt < order.size()) {
    const auto& rt = rts[order[i_rt]];
    const int64_t s0 = steps[i_step].first, s1 = steps[i_step].second;
    if (rt.start < s0) {
      ++i_rt;  // ahead of or across the step's start
    } else if (rt.end <= s1) {
      if (!rt.devs.empty()) {  // inside: scan its device nodes
        dmin = std::min(dmin, rt.dev_min);
        dmax = std::max(dmax, rt.dev_max);
        d.rt_matched[order[i_rt]] = 1;
        d.any_matched = true;
        d.matched_count[i_step] += static_cast<int64_t>(rt.devs.size());
      }
      ++i_rt;
    } else if (rt.start < s1) {
      ++i_rt;  // across the step's end
    } else {
      d.spans[i_step] = {dmin, dmax};  // starts after the step: next step, same runtime
      ++i_step;
      dmin = kMax;
      dmax = kMin;
    }
  }
  while (i_step < n_steps) {
    d.spans[i_step] = {dmin, dmax};
    dmin = kMax;
    dmax = kMin;
    ++i_step;
  }
  return d;
}

// StepParser._update_steps_duration: each step runs from the previous
// step's end (or its own host start, if later) to the end of its host span
// or of the device work it launched, whichever is later. Tail steps whose
// kernels were (probably) not all captured are dropped: after the last step
// that launched device work, and that one too when it launched fewer than
// 80 % of its predecessor's device nodes.
void update_steps_duration(int64_t prev, const DeviceSteps& d, Parsed& p) {
  const size_t n_steps = p.steps.size();
  for (size_t i = 0; i < n_steps; ++i) {
    const int64_t start = std::max(prev, p.steps[i].first);
    int64_t end = p.steps[i].second;
    if (d.spans[i].first == kMax) {
      end = std::max(end, start);
    } else {
      end = std::max(end, d.spans[i].second);
      if (end < start) end = start;  // "Abnormal step_end_time"
    }
    p.steps[i] = {start, end};
    prev = end;
  }
  if (n_steps <= 1) return;
  int64_t i = static_cast<int64_t>(n_steps) - 1;
  while (i >= 0 && d.matched_count[i] == 0) --i;
  if (i < 0) return;
  size_t keep = static_cast<size_t>(i) + 1;
  if (i > 0 && static_cast<double>(d.matched_count[i - 1]) * 0.8 > static_cast<double>(d.matched_count[i]))
    keep = static_cast<size_t>(i);
  if (keep < n_steps) {
    p.removed_tail = static_cast<int>(n_steps - keep);
    p.steps.resize(keep);
    p.step_names.resize(keep);
  }
}

Parsed parse(const Trace& t) {
  Parsed p;
  const std::vector<Ty> types = types_of(t);
  const Correlated c = correlate(t, types);
  const Range host = read_roles_and_steps(t, types, p);
  if (p.steps.empty()) {  // no ProfilerStep: all host events form step "0"
    // No op nor ProfilerStep at all: the plugin's step would be
    // (sys.maxsize, -sys.maxsize - 1); we show no step.
    if (host.first > host.second) return p;
    p.steps.emplace_back(host.first, host.second);
    p.step_names.emplace_back("0");
  }
  const DeviceSteps d = find_device_steps(p.steps, c.rts);
  // The device work not launched inside any step and ending before step 0's
  // first device work moves step 0's start to its end.
  if (d.any_matched) {
    int64_t prev_end = p.steps[0].first;
    if (d.spans[0].first != kMax) {
      for (const auto& dev : c.devs) {
        const bool matched = dev.owner >= 0 && d.rt_matched[dev.owner];
        if (!matched && dev.end < d.spans[0].first) prev_end = std::max(prev_end, dev.end);
      }
    }
    update_steps_duration(prev_end, d, p);
  }
  p.valid = !p.steps.empty();
  return p;
}

}  // namespace tb_detail

using namespace tb_detail;

// overall_parser.py OverallParser.aggregate + Statistics.create_from_range:
// the roles take the step time in ProfileRole order, each only what the
// earlier ones left (Kernel first, whole); what no role takes is Other.
// run_generator.py _generate_overview shows the raw sums per step and
// round() of the mean over steps.
namespace {
TbOverview overview_of(const Parsed& p);
TbGpuMetrics gpu_metrics_of(const Trace& t, const Parsed& p);
}  // namespace

TbOverview tb_overview(const Run& run) { return overview_of(parse(run.activities)); }

TbGpuMetrics tb_gpu_metrics(const Run& run) { return gpu_metrics_of(run.activities, parse(run.activities)); }

TbOverviewAndMetrics tb_overview_and_metrics(const Run& run) {
  const Trace& t = run.activities;
  const Parsed p = parse(t);
  return {overview_of(p), gpu_metrics_of(t, p)};
}

namespace {

TbOverview overview_of(const Parsed& p) {
  TbOverview o;
  auto has = [&](TbRole r) { return !p.role_ranges[static_cast<int>(r)].empty(); };
  // StepParser.has_runtime / has_kernel / has_communication / has_memcpy_or_memset.
  o.has_runtime = has(TbRole::kRuntime);
  o.has_kernel = has(TbRole::kKernel);
  o.has_communication = has(TbRole::kCommunication);
  o.has_memcpy_or_memset = has(TbRole::kMemcpy) || has(TbRole::kMemset);
  o.removed_tail_steps = p.removed_tail;
  if (!p.valid) return o;

  std::array<Ranges, kTbRoleCount> cost;
  Ranges slots;
  for (int r = 0; r < kTbRoleCount - 1; ++r) {
    Ranges range;
    if (!slots.empty()) {
      range = intersect(slots, p.role_ranges[r]);
    } else {
      // Plugin: `if slots:` is false for the first role, and again for a later
      // one if the roles before it covered every step: then that role is taken
      // whole and the slots start over from the steps. Kept as is.
      range = p.role_ranges[r];
      slots = merge_ranges(p.steps);
    }
    slots = subtract(slots, range);
    cost[r] = std::move(range);
  }
  cost[kTbRoleCount - 1] = std::move(slots);

  for (size_t i = 0; i < p.steps.size(); ++i) {
    StepBreakdownTb s;
    s.name = p.step_names[i];
    s.start_ns = p.steps[i].first;
    s.end_ns = p.steps[i].second;
    for (int r = 0; r < kTbRoleCount; ++r) {
      s.ns[r] = sum_within(cost[r], s.start_ns, s.end_ns);
      o.avg_ns[r] += static_cast<double>(s.ns[r]);
    }
    o.avg_total_ns += static_cast<double>(s.total_ns());
    o.steps.push_back(std::move(s));
  }
  const double n = static_cast<double>(o.steps.size());
  for (auto& v : o.avg_ns) v /= n;
  o.avg_total_ns /= n;
  return o;
}

}  // namespace

std::vector<StepBreakdownTb> tb_step_breakdown(const Run& run) { return tb_overview(run).steps; }

// gpu_metrics_parser.py GPUMetricsParser.parse_events and calculate_*: over
// the span [first step's start, last step's end] (data.py passes
// parser.steps[0][0], parser.steps[-1][1]), per GPU (kernel args "device").
namespace {

// One GPU's kernels, and their blocks per SM and occupancy where given.
struct DeviceKernels {
  Ranges kernels;
  struct Valued {
    int64_t a, b;
    double v;
  };
  std::vector<Valued> blocks, occupancy;
};

// The utilisation timeline: buckets of 10^k us, (10, 100] of them, over
// [global start, global end]; the last bucket takes the remainder.
void utilization_timeline(const Ranges& merged, const Parsed& p, TbDeviceMetrics& out) {
  const double range_us = static_cast<double>(p.global_end - p.global_start) / 1e3;
  int64_t bucket_us = 1;
  while (range_us / static_cast<double>(bucket_us) > 100) bucket_us *= 10;
  const int64_t buckets = static_cast<int64_t>(range_us / static_cast<double>(bucket_us));
  const int64_t bns = bucket_us * 1000;
  out.util_bucket_ns = bns;
  if (buckets <= 0 || merged.empty()) return;
  std::vector<Range> br(buckets);
  for (int64_t i = 0; i < buckets; ++i)
    br[i] = {p.global_start + i * bns, i < buckets - 1 ? p.global_start + (i + 1) * bns : p.global_end};
  std::vector<double> busy(buckets, 0.0);
  size_t ri = 0;
  int64_t bi = 0;
  while (ri < merged.size() && bi < buckets) {
    const Range& r = merged[ri];
    const Range& b = br[bi];
    if (b.second <= r.first) {
      ++bi;
    } else if (b.first >= r.second) {
      ++ri;
    } else {
      busy[bi] += static_cast<double>(std::min(r.second, b.second) - std::max(r.first, b.first));
      if (b.second < r.second) ++bi;
      else ++ri;
    }
  }
  for (int64_t i = 0; i < buckets; ++i)
    out.util_timeline.emplace_back(br[i].first, busy[i] / static_cast<double>(br[i].second - br[i].first));
  out.util_timeline.emplace_back(br.back().second, 0.0);
}

// calculate_approximated_sm_efficiency with merge_ranges_with_value: a
// sweep over the kernels' start / end points (START before END at equal
// times), the value being min(sum of running kernels' blocks per SM, 1);
// weighted by time within the steps [S0, S1], divided by their whole span.
void sm_efficiency(const std::vector<DeviceKernels::Valued>& blocks, int64_t s0, int64_t s1, TbDeviceMetrics& out) {
  struct Ep {
    int64_t time;
    int type;  // 0 START, 1 END
    double value;
  };
  std::vector<Ep> eps;
  eps.reserve(blocks.size() * 2);
  for (const auto& b : blocks) {
    eps.push_back({b.a, 0, b.v});
    eps.push_back({b.b, 1, b.v});
  }
  std::stable_sort(eps.begin(), eps.end(),
                   [](const Ep& x, const Ep& y) { return x.time != y.time ? x.time < y.time : x.type < y.type; });
  if (!eps.empty()) {
    int64_t last_t = eps[0].time;
    double last_v = eps[0].value;
    for (size_t i = 1; i < eps.size(); ++i) {
      const Ep& ep = eps[i];
      if (ep.time > last_t && last_v > 0.0) out.sm_efficiency_ranges.push_back({last_t, ep.time, std::min(last_v, 1.0)});
      last_t = ep.time;
      if (ep.type == 0) last_v += ep.value;
      else last_v -= ep.value;
    }
  }
  bool any = false;
  double weighted = 0;
  for (const auto& r : out.sm_efficiency_ranges) {
    const int64_t a = std::max(r.start_ns, s0), b = std::min(r.end_ns, s1);
    if (b > a) {
      any = true;
      weighted += r.value * static_cast<double>(b - a);
    }
  }
  if (any && s1 > s0) out.sm_efficiency = weighted / static_cast<double>(s1 - s0);
}

// calculate_occupancy: weighted by each kernel's time within the steps,
// divided by that same time.
void achieved_occupancy(const std::vector<DeviceKernels::Valued>& occupancy, int64_t s0, int64_t s1,
                        TbDeviceMetrics& out) {
  int64_t total = 0;
  double occ = 0;
  for (const auto& r : occupancy) {
    const int64_t a = std::max(r.a, s0), b = std::min(r.b, s1);
    if (a < b) {
      occ += r.v * static_cast<double>(b - a);
      total += b - a;
    }
  }
  if (total > 0) out.achieved_occupancy = occ / static_cast<double>(total);
}

TbGpuMetrics gpu_metrics_of(const Trace& t, const Parsed& p) {
  TbGpuMetrics m;
  if (!p.valid) return m;
  const int64_t s0 = p.steps.front().first, s1 = p.steps.back().second;
  m.steps_start_ns = s0;
  m.steps_end_ns = s1;
  m.global_start_ns = p.global_start;
  m.global_end_ns = p.global_end;
  std::map<int64_t, DeviceKernels> per;  // gpu_ids, in id order
  for (const Event& e : t.events) {
    if (e.cat != Cat::kKernel || e.device < 0) continue;  // parse_event: gpu_id None -> skipped
    DeviceKernels& d = per[e.device];
    d.kernels.emplace_back(e.ts_ns, e.end_ns());
    // "blocks per SM" must be > 0, "est. achieved occupancy %" >= 0; the model's
    // -1 means the arg was absent (None), which the plugin skips too.
    if (e.blocks_per_sm > 0.0) d.blocks.push_back({e.ts_ns, e.end_ns(), e.blocks_per_sm});
    if (e.est_occupancy >= 0.0) d.occupancy.push_back({e.ts_ns, e.end_ns(), e.est_occupancy});
  }
  for (auto& [id, d] : per) {
    TbDeviceMetrics out;
    out.device = id;
    // calculate_gpu_utilization: union of kernels, clipped to the steps.
    const Ranges merged = merge_ranges(std::move(d.kernels));
    out.busy_ns = sum_within(merged, s0, s1);
    out.utilization = s1 > s0 ? static_cast<double>(out.busy_ns) / static_cast<double>(s1 - s0) : 0.0;
    utilization_timeline(merged, p, out);
    sm_efficiency(d.blocks, s0, s1, out);
    achieved_occupancy(d.occupancy, s0, s1, out);
    m.devices.push_back(std::move(out));
  }
  return m;
}

}  // namespace

}  // namespace torchneck::gpu
