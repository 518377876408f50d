// Holistic Trace Analysis (HTA) numbers, computed in C++ on a run's activities
// (Run::activities, as read from a Kineto trace).
//
// Reproduces, for one trace (one rank), what facebookresearch/
// HolisticTraceAnalysis at commit f4d0062c returns from
//   TraceAnalysis.get_temporal_breakdown()
//   TraceAnalysis.get_idle_time_breakdown()        (consecutive_kernel_delay=30)
//   TraceAnalysis.get_gpu_kernel_breakdown()[0]    (include_memory_kernels=True)
// with HTA's own definitions, including its preprocessing of the trace
// (hta/common/trace_parser.py, hta/common/trace.py): times in integer
// microseconds rounded the way HTA rounds them, and the GPU work of the last
// ProfilerStep dropped. hta.cc says, for each rule, where in HTA it comes from.
// The oracle is ../shared/fixtures/kineto/hta_expected.json.
//
// All durations are integer microseconds, as HTA reports them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/run.h"

namespace torchneck::gpu {

// hta/utils/utils.py KernelType.
enum class KernelType : uint8_t { kCommunication, kMemory, kComputation, kOther };

// "COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER" (KernelType.<X>.name).
const char* kernel_type_name(KernelType t);

// hta/utils/utils.py get_kernel_type(name): the kernel's name alone decides,
// through the regular expressions of hta/common/types.py. HTA ignores the
// category; `cat` is accepted so callers can pass what they have, and is
// unused (a "gpu_memcpy" named "Memcpy HtoD ..." is MEMORY because of its
// name, and a cuda_sync event named "Context Sync" is OTHER).
KernelType kernel_type(std::string_view name,
                       ActivityKind cat = ActivityKind::kKernel);

struct HtaOptions {
  // get_idle_time_breakdown(consecutive_kernel_delay=30): a gap shorter than
  // this (us) between two kernels on a stream, not explained by the host, is
  // "kernel_wait".
  int64_t consecutive_kernel_delay_us = 30;
  // TraceAnalysis(include_last_profiler_step=False): HTA drops the GPU work
  // launched from the last ProfilerStep on.
  bool include_last_profiler_step = false;
};

// get_temporal_breakdown(): one row (this trace's rank).
struct TemporalBreakdown {
  int64_t rank = 0;
  // False when the trace has no GPU work at all; HTA itself raises
  // IndexError then (cpu_only_gloo fixture). All numbers are 0.
  bool has_gpu_work = false;
  int64_t idle_time_us = 0;         // "idle_time(us)"
  int64_t compute_time_us = 0;      // "compute_time(us)"
  int64_t non_compute_time_us = 0;  // "non_compute_time(us)"
  int64_t kernel_time_us = 0;       // "kernel_time(us)"
  // Rounded to 2 decimals, as HTA does.
  double idle_time_pctg = 0;
  double compute_time_pctg = 0;
  double non_compute_time_pctg = 0;
};

// get_idle_time_breakdown(): one entry per CUDA stream. HTA emits one row per
// (stream, idle_category) for the categories that occur on the stream; the
// has_* flags say which rows HTA has ("other" always: the stream's first
// kernel falls in it with no interval).
struct IdleStream {
  int64_t rank = 0;
  int64_t stream = -1;
  bool has_host_wait = false, has_kernel_wait = false, has_other = false;
  int64_t host_wait_us = 0;    // "idle_time" of the "host_wait" row
  int64_t kernel_wait_us = 0;  // ... "kernel_wait"
  int64_t other_us = 0;        // ... "other"
  // "idle_time_ratio": the category's share of the stream's idle time,
  // rounded to 2 decimals as HTA does; NaN when the stream has no idle time.
  double host_wait_ratio = 0, kernel_wait_ratio = 0, other_ratio = 0;

  int64_t idle_time_us() const { return host_wait_us + kernel_wait_us + other_us; }
};

// get_gpu_kernel_breakdown()[0]: one row per kernel type, or overlap of
// types ("COMPUTATION overlapping COMMUNICATION"), ordered by sum descending.
struct KernelTypeShare {
  std::string kernel_type;  // exactly as HTA spells it
  int64_t sum_us = 0;       // "sum": time during which exactly this set of types runs
  double percentage = 0;    // "percentage", rounded to 1 decimal as HTA does
};

struct HtaBreakdowns {
  TemporalBreakdown temporal;
  std::vector<IdleStream> idle;
  std::vector<KernelTypeShare> kernel_types;
};

TemporalBreakdown hta_temporal_breakdown(const Run& run,
                                         const HtaOptions& opt = {});
// Streams in ascending order (HTA lists them in order of first appearance in
// the trace file, which the trace model does not keep).
std::vector<IdleStream> hta_idle_breakdown(const Run& run,
                                           const HtaOptions& opt = {});
std::vector<KernelTypeShare> hta_kernel_type_breakdown(const Run& run,
                                                       const HtaOptions& opt = {});
// All three, preparing the trace once.
HtaBreakdowns hta_breakdowns(const Run& run, const HtaOptions& opt = {});

// HTA's rank for a trace (hta/common/trace_file.py create_rank_to_trace_dict):
// distributedInfo's "rank", else 0.
int64_t hta_rank(const Run& run);

// HTA's integer-microsecond start and end of an event
// (hta/common/trace_parser.py round_down_time_stamps): ts = ceil(ts_us),
// end = floor(ts_us + dur_us), in double arithmetic on the doubles Python's
// json gives for the text. A sub-microsecond event can get end < ts. Exact
// only when ts_ns/dur_ns are the text's own nanoseconds (model/activity.h):
// above 2^53 ns (epoch timestamps) nanoseconds that went through a double
// can make HTA's value 1 us off.
void hta_time_us(const Activity& e, int64_t* ts_us, int64_t* end_us);

// The double Python's json gives for the text "ns / 1000" microseconds
// (three decimals): the nearest double to the exact quotient.
double hta_us_as_double(int64_t ns);

}  // namespace torchneck::gpu
