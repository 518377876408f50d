// HTA's temporal, idle-time and kernel-type breakdowns (see hta.h).
//
// Every rule below names the place in facebookresearch/HolisticTraceAnalysis
// (commit f4d0062c) it copies. HTA works on a pandas DataFrame of the trace;
// the steps it takes before any analysis matter as much as the analysis:
//
//  1. Parse (hta/common/trace_parser.py): events without "dur" or "cat" and
//     events of category "Trace" are dropped (_compress_df). Times become
//     integer microseconds: ts = ceil(ts), end = floor(ts + dur),
//     dur = end - ts (round_down_time_stamps). args.stream is read with
//     pd.to_numeric(errors="coerce"), anything else is -1
//     (utils.normalize_gpu_stream_numbers); args.correlation, default -1.
//  2. Correlate (hta/common/trace.py transform_correlation_to_index): a GPU
//     event gets the index of the CPU event with the same correlation.
//  3. Filter (trace.py Trace._filter_irrelevant_gpu_kernels, run by
//     load_traces): when the trace holds more than one distinct
//     "ProfilerStep#N" name, only the CPU events that start before the last
//     ProfilerStep starts are kept, and only the GPU events whose correlation
//     one of those kept CPU events has (a pandas inner merge: one copy per
//     matching CPU event). Everything else is gone from the trace.
//     "GPU event" here is hta/common/trace_filter.py GPUKernelFilter:
//     stream >= 0 and correlation >= 0, or named "Event Sync"/"Context Sync";
//     every other event is a "CPU operator" (CPUOperatorFilter).
//  4. Analyse (hta/analyzers/breakdown_analysis.py BreakdownAnalysis).
#include "analyze/gpu/hta.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace torchneck::gpu {
namespace {

using Cat = ActivityKind;
using Event = Activity;
using Trace = Activities;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

// Python's re: '.' does not match '\n', so ".*X" (with re.match, anchored at
// the start) finds X only in the first line.
std::string_view first_line(std::string_view s) { return s.substr(0, s.find('\n')); }

// hta/common/types.py CommunicateKernelGroupingPattern:
//   (^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)
bool is_comm_kernel(std::string_view n) {
  return starts_with(n, "nccl") || starts_with(n, "hip") || starts_with(n, "hccl") ||
         contains(first_line(n), "ncclKernel");
}

// hta/common/types.py MemoryKernelGroupingPattern:
//   (^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)
bool is_memory_kernel(std::string_view n) {
  return starts_with(n, "Memcpy") || starts_with(n, "hipMemcpy") || starts_with(n, "Memset") ||
         starts_with(n, "hipMemset") || starts_with(n, "dma");
}

// hta/common/types.py ComputeKernelGroupingPattern, inverse_match=True: a
// kernel is COMPUTATION unless re.match finds
//   (^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|
//   (cuda.*LaunchKernel)|(^runFunction)|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|
//   (^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution)
bool is_compute_kernel(std::string_view n) {
  const std::string_view line = first_line(n);
  const bool excluded =
      starts_with(n, "nccl") || contains(line, "Memcpy") || contains(line, "Memset") ||
      contains(line, "dma") || contains(line, "Sync") || starts_with(n, "Stream Wait Event") ||
      (starts_with(n, "cuda") && contains(line.substr(4), "LaunchKernel")) ||
      starts_with(n, "runFunction") || starts_with(n, "hip") || starts_with(n, "job_exe") ||
      starts_with(n, "packet") || starts_with(n, "pe_exe") || starts_with(n, "cpum_exe_subgraph") ||
      starts_with(n, "hccl") || starts_with(n, "collective_subgraph_execution");
  return !excluded;
}

// numpy.round(x, decimals), which pandas' round() calls: rint(x * 10^d) / 10^d
// (rint rounds half to even).
double np_round(double x, int decimals) {
  const double scale = decimals == 1 ? 10.0 : 100.0;
  return std::nearbyint(x * scale) / scale;
}

}  // namespace

// The double Python's json module gives HTA for a Kineto time: the double
// nearest to the text, i.e. to the text's exact nanoseconds / 1000 (the
// model's Activity::ts_ns/dur_ns are those nanoseconds, model/activity.h). Above
// 2^53 ns (epoch timestamps) a double's step is 0.25 us, and nanoseconds
// that went through a double themselves (llround(d * 1000)) no longer tell
// which of two neighbours the text was: HTA's ceil/floor can then differ by
// 1 us.
// The nearest double (ties to even) to ns / 1000, as an exact integer
// division: the decimal text "W.FFF" read by a correctly rounding parser is
// that value. (Formatting and re-parsing the text cost a tenth of the whole
// analysis.)
double hta_us_as_double(int64_t ns) {
  constexpr int64_t kExact = int64_t{1} << 53;
  // Both operands exact: IEEE division rounds the exact quotient once.
  if (ns > -kExact && ns < kExact) return static_cast<double>(ns) / 1000.0;
  if (ns % 1000 == 0) return static_cast<double>(ns / 1000);
  const uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  // mag >= 2^53, so mag / 1000 >= 2^43: scale it by 2^k so that the integer
  // quotient has 53 bits, q in [2^52, 2^53), then round on the remainder.
  const uint64_t whole = mag / 1000;
  const int top = 63 - __builtin_clzll(whole);  // 2^top <= whole < 2^(top+1)
  double v = 0;
  if (top <= 52) {
    const int k = 52 - top;
    const unsigned __int128 num = static_cast<unsigned __int128>(mag) << k;
    uint64_t q = static_cast<uint64_t>(num / 1000);
    const uint64_t r = static_cast<uint64_t>(num % 1000);
    if (r > 500 || (r == 500 && (q & 1) != 0)) ++q;  // q <= 2^53: still exact
    v = std::ldexp(static_cast<double>(q), -k);
  } else {  // |ns| >= 2^53 * 1000 (~9e18): a 64-bit quotient rounds itself
    char buf[48];
    const int len = std::snprintf(buf, sizeof buf, "%llu.%03llu", static_cast<unsigned long long>(whole),
                                  static_cast<unsigned long long>(mag % 1000));
    std::from_chars(buf, buf + len, v);  // correctly rounded, locale-free
  }
  return ns < 0 ? -v : v;
}

namespace {

// HTA's stream of an event: args.stream through pd.to_numeric(errors=
// "coerce"), -1 when missing or not a number (utils.py
// normalize_gpu_stream_numbers). Where the model's Event::stream differs:
//  - ROCm writes "stream": "0x0" on its runtime calls (hipLaunchKernel...):
//    not a number for pandas, so -1, while the model reads the leading "0".
//    CUDA runtime/driver calls carry no stream arg, so runtime and driver
//    events are -1 here.
//  - Kineto writes no stream arg on gpu_user_annotation events (they sit on
//    the stream's row through their tid only): -1 whatever the model says.
int64_t hta_stream(const Event& e) {
  if (e.cat == Cat::kGpuUserAnnotation || e.cat == Cat::kRuntime || e.cat == Cat::kDriver) return -1;
  return e.stream;
}

// breakdown_analysis.py get_idle_time_breakdown: kernel_cats = kernel, Kernel,
// gpu_memset, Memset, gpu_memcpy, Memcpy, mtia_ccp_events ("cuda_sync"
// events are left out).
bool is_idle_kernel_cat(Cat c) { return c == Cat::kKernel || c == Cat::kMemcpy || c == Cat::kMemset; }

struct Interval {
  int64_t ts, end;
};

// hta/utils/utils.py merge_kernel_intervals: sort by ts; a row opens a new
// group when its ts is greater than every earlier row's end (strictly:
// touching intervals merge); a group spans [min ts, max end].
std::vector<Interval> merge_kernel_intervals(std::vector<Interval> v) {
  std::stable_sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.ts < b.ts; });
  std::vector<Interval> out;
  int64_t cummax = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i == 0 || v[i].ts > cummax) {
      out.push_back(v[i]);
    } else {
      out.back().end = std::max(out.back().end, v[i].end);
    }
    cummax = i == 0 ? v[i].end : std::max(cummax, v[i].end);
  }
  return out;
}

int64_t run_time(const std::vector<Interval>& merged) {
  int64_t s = 0;
  for (const Interval& m : merged) s += m.end - m.ts;
  return s;
}

// The trace as HTA holds it after loading (steps 1-3 above), reduced to what
// the three breakdowns read.
struct Prepared {
  int64_t rank = 0;
  // Events with stream != -1 that survived the filter (copies collapsed:
  // they change no merged interval), in trace order.
  std::vector<Interval> gpu;
  std::vector<KernelType> gpu_type;
  // Kernel/memcpy/memset rows for the idle-time breakdown, one per copy.
  struct KernelRow {
    int64_t stream, ts, end;
    bool has_runtime;     // the correlated CPU event is still in the trace
    int64_t runtime_ts;   // its ts ("ts_runtime")
  };
  std::vector<KernelRow> kernels;
};

Prepared prepare(const Run& run, const HtaOptions& opt) {
  const Trace& trace = run.activities;
  Prepared p;
  p.rank = hta_rank(run);
  const size_t n = trace.events.size();

  // Per-name caches: kernel type, ProfilerStep name.
  std::vector<int8_t> type_of(trace.names.size(), -1);
  std::vector<int8_t> step_of(trace.names.size(), -1);
  auto type_for = [&](uint32_t name) {
    if (name >= type_of.size()) return KernelType::kOther;
    if (type_of[name] < 0) type_of[name] = static_cast<int8_t>(kernel_type(trace.names[name]));
    return static_cast<KernelType>(type_of[name]);
  };
  // hta/common/types.py ProfilerStepGroupingPattern: re.match ^ProfilerStep#(\d+)
  auto is_step = [&](uint32_t name) {
    if (name >= step_of.size()) return false;
    if (step_of[name] < 0) {
      const std::string& s = trace.names[name];
      constexpr std::string_view kStep = "ProfilerStep#";
      step_of[name] = s.size() > kStep.size() && starts_with(s, kStep) &&
                      s[kStep.size()] >= '0' && s[kStep.size()] <= '9';
    }
    return step_of[name] == 1;
  };

  std::vector<int64_t> ts(n), end(n), stream(n);
  std::vector<uint8_t> live(n), gpu_group(n);
  std::unordered_set<std::string_view> step_names;  // distinct symbols
  for (size_t i = 0; i < n; ++i) {
    const Event& e = trace.events[i];
    if (e.cat == Cat::kTrace) continue;  // trace_parser.py _compress_df drops cat "Trace"
    live[i] = 1;
    hta_time_us(e, &ts[i], &end[i]);
    stream[i] = hta_stream(e);
    const std::string_view name = e.name < trace.names.size() ? std::string_view(trace.names[e.name]) : "";
    // trace_filter.py _filter_gpu_kernels_with_cuda_sync
    gpu_group[i] = (stream[i] >= 0 && e.correlation >= 0) || name == "Event Sync" || name == "Context Sync";
    if (is_step(e.name)) step_names.insert(name);
  }

  // Step 3, trace.py _filter_irrelevant_gpu_kernels /
  // filter_gpu_kernels_with_cpu_correlation. copies[i]: how many times the
  // event is in HTA's filtered trace.
  std::vector<int32_t> copies(n, 0);
  for (size_t i = 0; i < n; ++i) copies[i] = live[i];
  if (step_names.size() > 1) {  // "only one iteration": no filtering
    bool any_cpu = false, any_step = false;
    int64_t last_start = LLONG_MIN, last_end = LLONG_MIN, min_ts = LLONG_MAX, max_end = LLONG_MIN;
    for (size_t i = 0; i < n; ++i) {
      if (!live[i] || gpu_group[i]) continue;
      any_cpu = true;
      min_ts = std::min(min_ts, ts[i]);
      max_end = std::max(max_end, end[i]);
      // filtered_profiler_step_rows: every CPU-side event named
      // ProfilerStep#N, gpu_user_annotation ones included.
      if (is_step(trace.events[i].name)) {
        any_step = true;
        last_start = std::max(last_start, ts[i]);
        last_end = std::max(last_end, end[i]);
      }
    }
    if (any_cpu) {  // "if cpu_kernels.empty: return trace_df"
      if (!any_step) last_start = min_ts, last_end = max_end;
      std::unordered_map<int64_t, int32_t> cpu_with_corr;
      for (size_t i = 0; i < n; ++i) {
        if (!live[i] || gpu_group[i]) continue;
        const bool kept = opt.include_last_profiler_step ? ts[i] <= last_end : ts[i] < last_start;
        copies[i] = kept;
        if (kept) ++cpu_with_corr[trace.events[i].correlation];
      }
      for (size_t i = 0; i < n; ++i) {
        if (!live[i] || !gpu_group[i]) continue;
        auto it = cpu_with_corr.find(trace.events[i].correlation);
        copies[i] = it == cpu_with_corr.end() ? 0 : it->second;
      }
    }
  }

  // Step 2, trace.py transform_correlation_to_index: the CPU event (among
  // those with correlation != -1) sharing the GPU event's correlation; with
  // several, the last one's index is written last.
  std::unordered_map<int64_t, size_t> cpu_by_corr;
  for (size_t i = 0; i < n; ++i) {
    if (live[i] && !gpu_group[i] && trace.events[i].correlation != -1)
      cpu_by_corr[trace.events[i].correlation] = i;
  }

  for (size_t i = 0; i < n; ++i) {
    if (copies[i] == 0 || stream[i] == -1) continue;
    const Event& e = trace.events[i];
    // breakdown_analysis.py: gpu_kernels = trace_df[trace_df["stream"].ne(-1)]
    p.gpu.push_back({ts[i], end[i]});
    p.gpu_type.push_back(type_for(e.name));
    if (!is_idle_kernel_cat(e.cat)) continue;
    // get_idle_time_breakdown: join on index_correlation with the loaded
    // trace; the runtime event is there if it survived the filter.
    Prepared::KernelRow row{stream[i], ts[i], end[i], false, 0};
    if (e.correlation != -1) {
      auto it = cpu_by_corr.find(e.correlation);
      if (it != cpu_by_corr.end() && copies[it->second] > 0) {
        row.has_runtime = true;
        row.runtime_ts = ts[it->second];
      }
    }
    for (int32_t c = 0; c < copies[i]; ++c) p.kernels.push_back(row);
  }
  return p;
}

// breakdown_analysis.py get_temporal_breakdown / idle_time_per_rank and
// _get_idle_time_for_kernels.
TemporalBreakdown temporal(const Prepared& p) {
  TemporalBreakdown t;
  t.rank = p.rank;
  if (p.gpu.empty()) return t;  // HTA: merged_kernels.iloc[-1] raises IndexError
  t.has_gpu_work = true;
  const std::vector<Interval> merged = merge_kernel_intervals(p.gpu);
  // kernel time: end of the last merged interval - start of the first.
  t.kernel_time_us = merged.back().end - merged.front().ts;
  t.idle_time_us = t.kernel_time_us - run_time(merged);
  // compute time: the merged COMPUTATION kernels alone.
  std::vector<Interval> comp;
  for (size_t i = 0; i < p.gpu.size(); ++i)
    if (p.gpu_type[i] == KernelType::kComputation) comp.push_back(p.gpu[i]);
  t.compute_time_us = run_time(merge_kernel_intervals(std::move(comp)));
  t.non_compute_time_us = t.kernel_time_us - t.compute_time_us - t.idle_time_us;
  // result_df["idle_time"] = idle / kernel; idle_time_pctg = round(100 * idle_time, 2)
  const double kt = static_cast<double>(t.kernel_time_us);
  t.idle_time_pctg = np_round(100.0 * (static_cast<double>(t.idle_time_us) / kt), 2);
  t.compute_time_pctg = np_round(100.0 * (static_cast<double>(t.compute_time_us) / kt), 2);
  t.non_compute_time_pctg = np_round(100.0 * (static_cast<double>(t.non_compute_time_us) / kt), 2);
  return t;
}

// breakdown_analysis.py get_idle_time_breakdown and _analyze_idle_time_for_stream.
std::vector<IdleStream> idle(const Prepared& p, const HtaOptions& opt) {
  std::map<int64_t, std::vector<const Prepared::KernelRow*>> by_stream;
  for (const auto& k : p.kernels) by_stream[k.stream].push_back(&k);
  std::vector<IdleStream> out;
  for (auto& [stream, rows] : by_stream) {
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto* a, const auto* b) { return a->ts < b->ts; });
    IdleStream s;
    s.rank = p.rank;
    s.stream = stream;
    // The first kernel has no previous one: idle_interval NaN, category
    // "other" (the default), summed as 0.
    s.has_other = true;
    for (size_t j = 1; j < rows.size(); ++j) {
      const int64_t prev_end = rows[j - 1]->end;
      const int64_t interval = rows[j]->ts - prev_end;
      // host wait: the runtime call started after the previous kernel ended.
      if (rows[j]->has_runtime && rows[j]->runtime_ts > prev_end) {
        s.has_host_wait = true;
        s.host_wait_us += interval;
      } else if (interval < opt.consecutive_kernel_delay_us) {
        // kernel wait: a gap shorter than consecutive_kernel_delay.
        s.has_kernel_wait = true;
        s.kernel_wait_us += interval;
      } else {
        s.other_us += interval;
      }
    }
    // idle_time_ratio = category / stream total, then .round(2).
    const double total = static_cast<double>(s.idle_time_us());
    s.host_wait_ratio = np_round(static_cast<double>(s.host_wait_us) / total, 2);
    s.kernel_wait_ratio = np_round(static_cast<double>(s.kernel_wait_us) / total, 2);
    s.other_ratio = np_round(static_cast<double>(s.other_us) / total, 2);
    out.push_back(s);
  }
  return out;
}

// breakdown_analysis.py get_gpu_kernel_breakdown / _get_gpu_kernel_type_time,
// with include_memory_kernels=True (TraceAnalysis' default): the types
// analysed are COMPUTATION (bit 1), COMMUNICATION (bit 2), MEMORY (bit 4);
// OTHER kernels are left out. Each type's kernels are merged; the starts
// (+bit) and ends (-bit) of all merged intervals are swept in time order; a
// running sum > 0 names the set of types running, joined with
// " overlapping " in that order, and each sweep step adds the time to the
// next point to that name.
std::vector<KernelTypeShare> kernel_types(const Prepared& p) {
  static constexpr KernelType kTypes[3] = {KernelType::kComputation, KernelType::kCommunication,
                                           KernelType::kMemory};
  struct Point {
    int64_t time;
    int delta;
  };
  std::vector<Point> points;
  for (int b = 0; b < 3; ++b) {
    std::vector<Interval> of_type;
    for (size_t i = 0; i < p.gpu.size(); ++i)
      if (p.gpu_type[i] == kTypes[b]) of_type.push_back(p.gpu[i]);
    for (const Interval& m : merge_kernel_intervals(std::move(of_type))) {
      points.push_back({m.ts, 1 << b});
      points.push_back({m.end, -(1 << b)});
    }
  }
  // HTA sorts with pandas' default (unstable) quicksort; points at equal times
  // only decide which zero-length rows appear, never a nonzero sum.
  std::stable_sort(points.begin(), points.end(),
                   [](const Point& a, const Point& b) { return a.time < b.time; });
  int64_t sums[8] = {0};
  bool seen[8] = {false};
  int running = 0;
  for (size_t j = 0; j < points.size(); ++j) {
    running += points[j].delta;
    if (running <= 0 || j + 1 == points.size()) continue;
    seen[running & 7] = true;
    sums[running & 7] += points[j + 1].time - points[j].time;
  }
  // groupby(kernel_type) (sorted by name), then sort_values("sum", descending).
  std::vector<KernelTypeShare> out;
  int64_t total = 0;
  for (int r = 1; r < 8; ++r) {
    if (!seen[r]) continue;
    KernelTypeShare k;
    for (int b = 0; b < 3; ++b) {
      if (!(r & (1 << b))) continue;
      if (!k.kernel_type.empty()) k.kernel_type += " overlapping ";
      k.kernel_type += kernel_type_name(kTypes[b]);
    }
    k.sum_us = sums[r];
    total += sums[r];
    out.push_back(std::move(k));
  }
  std::sort(out.begin(), out.end(), [](const KernelTypeShare& a, const KernelTypeShare& b) {
    return a.kernel_type < b.kernel_type;
  });
  std::stable_sort(out.begin(), out.end(), [](const KernelTypeShare& a, const KernelTypeShare& b) {
    return a.sum_us > b.sum_us;
  });
  // percentage = sum / total * 100, rounded to 1 decimal.
  for (KernelTypeShare& k : out)
    k.percentage = np_round(static_cast<double>(k.sum_us) / static_cast<double>(total) * 100.0, 1);
  return out;
}

}  // namespace

const char* kernel_type_name(KernelType t) {
  switch (t) {
    case KernelType::kCommunication: return "COMMUNICATION";
    case KernelType::kMemory: return "MEMORY";
    case KernelType::kComputation: return "COMPUTATION";
    case KernelType::kOther: break;
  }
  return "OTHER";
}

// hta/utils/utils.py get_kernel_type: communication, then memory, then
// computation, else other.
KernelType kernel_type(std::string_view name, ActivityKind /*cat*/) {
  if (is_comm_kernel(name)) return KernelType::kCommunication;
  if (is_memory_kernel(name)) return KernelType::kMemory;
  if (is_compute_kernel(name)) return KernelType::kComputation;
  return KernelType::kOther;
}

int64_t hta_rank(const Run& run) { return run.rank.rank >= 0 ? run.rank.rank : 0; }

void hta_time_us(const Activity& e, int64_t* ts_us, int64_t* end_us) {
  const double ts = hta_us_as_double(e.ts_ns);
  const double dur = hta_us_as_double(e.dur_ns);
  *ts_us = static_cast<int64_t>(std::ceil(ts));
  *end_us = static_cast<int64_t>(std::floor(ts + dur));
}

TemporalBreakdown hta_temporal_breakdown(const Run& run, const HtaOptions& opt) {
  return temporal(prepare(run, opt));
}

std::vector<IdleStream> hta_idle_breakdown(const Run& run, const HtaOptions& opt) {
  return idle(prepare(run, opt), opt);
}

std::vector<KernelTypeShare> hta_kernel_type_breakdown(const Run& run, const HtaOptions& opt) {
  return kernel_types(prepare(run, opt));
}

HtaBreakdowns hta_breakdowns(const Run& run, const HtaOptions& opt) {
  const Prepared p = prepare(run, opt);
  return {temporal(p), idle(p, opt), kernel_types(p)};
}

}  // namespace torchneck::gpu
