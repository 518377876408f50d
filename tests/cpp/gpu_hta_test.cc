// Holistic Trace Analysis breakdowns (src/analyze/gpu/hta.h).
//
// Two kinds of checks:
//  - hand-built traces whose expected numbers are worked out by hand from
//    HTA's definitions (hta/analyzers/breakdown_analysis.py, hta/utils/utils.py,
//    hta/common/trace.py at commit f4d0062c), each step written out below;
//  - the real traces of ../shared/fixtures/kineto against what HTA itself
//    computed on them (hta_expected.json).
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "analyze/gpu/hta.h"
#include "ingest/kineto_json.h"
#include "trace_runs.h"

namespace torchneck::gpu {
namespace {

using kineto::Cat;
using kineto::Event;
using kineto::Trace;

constexpr int64_t kUs = 1000;  // ns

struct TraceBuilder {
  Trace t;
  uint32_t name(const std::string& s) {
    for (uint32_t i = 0; i < t.names.size(); ++i)
      if (t.names[i] == s) return i;
    t.names.push_back(s);
    return static_cast<uint32_t>(t.names.size() - 1);
  }
  // Times in microseconds.
  Event& add(Cat cat, const std::string& n, int64_t ts_us, int64_t dur_us, int64_t stream = -1,
             int64_t corr = -1) {
    Event e;
    e.cat = cat;
    e.name = name(n);
    e.ts_ns = ts_us * kUs;
    e.dur_ns = dur_us * kUs;
    e.stream = stream;
    e.correlation = corr;
    t.events.push_back(e);
    return t.events.back();
  }
  Event& kernel(const std::string& n, int64_t ts, int64_t dur, int64_t stream, int64_t corr) {
    return add(Cat::kKernel, n, ts, dur, stream, corr);
  }
  Event& runtime(int64_t ts, int64_t corr, int64_t dur = 1) {
    return add(Cat::kRuntime, "cudaLaunchKernel", ts, dur, -1, corr);
  }
  const Trace& done() {  // the model's order: ts, then longer first
    std::stable_sort(t.events.begin(), t.events.end(), [](const Event& a, const Event& b) {
      return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.dur_ns > b.dur_ns;
    });
    return t;
  }
};

std::map<std::string, KernelTypeShare> by_type(const std::vector<KernelTypeShare>& v) {
  std::map<std::string, KernelTypeShare> m;
  for (const auto& k : v) m[k.kernel_type] = k;
  return m;
}

// --- kernel type: hta/common/types.py patterns, through get_kernel_type ---

TEST(GpuHtaKernelType, NamesClassifyAsHtaRegexesSay) {
  // COMMUNICATION: (^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*), tried first.
  EXPECT_EQ(kernel_type("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"), KernelType::kCommunication);
  EXPECT_EQ(kernel_type("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"),
            KernelType::kCommunication);
  EXPECT_EQ(kernel_type("void cutlass_ncclKernel_wrapper<1>()"), KernelType::kCommunication);
  // "^hip" is a communication prefix, so a hipMemcpy* is COMMUNICATION, not MEMORY.
  EXPECT_EQ(kernel_type("hipMemcpyWithStream"), KernelType::kCommunication);
  EXPECT_EQ(kernel_type("hccl_all_reduce"), KernelType::kCommunication);
  // MEMORY: (^(hip)?Memcpy)|(^(hip)?Memset)|(^dma).
  EXPECT_EQ(kernel_type("Memcpy HtoD (Pageable -> Device)", Cat::kMemcpy), KernelType::kMemory);
  EXPECT_EQ(kernel_type("Memset (Device)", Cat::kMemset), KernelType::kMemory);
  EXPECT_EQ(kernel_type("dma_transfer"), KernelType::kMemory);
  // COMPUTATION: whatever the inverse pattern does not match.
  EXPECT_EQ(kernel_type("volta_sgemm_128x64_nn"), KernelType::kComputation);
  EXPECT_EQ(kernel_type("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()"),
            KernelType::kComputation);
  // OTHER: matched by the inverse compute pattern but by neither of the others.
  EXPECT_EQ(kernel_type("Context Sync", Cat::kSync), KernelType::kOther);   // (^.*Sync)
  EXPECT_EQ(kernel_type("Event Sync", Cat::kSync), KernelType::kOther);
  EXPECT_EQ(kernel_type("Stream Wait Event"), KernelType::kOther);          // (^Stream Wait Event)
  EXPECT_EQ(kernel_type("cudaLaunchKernel"), KernelType::kOther);           // (cuda.*LaunchKernel)
  EXPECT_EQ(kernel_type("void copy_via_Memcpy_kernel()"), KernelType::kOther);  // (.*Memcpy)
  EXPECT_EQ(kernel_type("fused_dmaload_kernel"), KernelType::kOther);           // (.*dma)
  EXPECT_EQ(kernel_type("runFunction - job"), KernelType::kOther);
  // re's '.' stops at a newline: ".*ncclKernel" only looks at the first line.
  EXPECT_EQ(kernel_type("gemm\nncclKernel"), KernelType::kComputation);
  EXPECT_STREQ(kernel_type_name(KernelType::kComputation), "COMPUTATION");
  EXPECT_STREQ(kernel_type_name(KernelType::kCommunication), "COMMUNICATION");
  EXPECT_STREQ(kernel_type_name(KernelType::kMemory), "MEMORY");
  EXPECT_STREQ(kernel_type_name(KernelType::kOther), "OTHER");
}

// --- times: trace_parser.py round_down_time_stamps ---

TEST(GpuHtaTime, CeilStartFloorEndInDoubleMicroseconds) {
  Event e;
  int64_t ts = 0, end = 0;
  // 1.5 us + 2.2 us: ts = ceil(1.5) = 2, end = floor(3.7) = 3.
  e.ts_ns = 1500;
  e.dur_ns = 2200;
  hta_time_us(e, &ts, &end);
  EXPECT_EQ(ts, 2);
  EXPECT_EQ(end, 3);
  // A sub-microsecond event between integers: ceil(10.2) = 11 > floor(10.9) = 10.
  e.ts_ns = 10200;
  e.dur_ns = 700;
  hta_time_us(e, &ts, &end);
  EXPECT_EQ(ts, 11);
  EXPECT_EQ(end, 10);
  // Whole microseconds stay as they are.
  e.ts_ns = 7 * kUs;
  e.dur_ns = 3 * kUs;
  hta_time_us(e, &ts, &end);
  EXPECT_EQ(ts, 7);
  EXPECT_EQ(end, 10);
  // An epoch timestamp: 1700000000000000.123 us parses to the nearest double,
  // whose spacing there is 0.25 us: 1700000000000000.0, so ceil gives ...000,
  // not ...001; + 0.5 us = ...000.5 (exact), floor ...000.
  e.ts_ns = 1700000000000000123;
  e.dur_ns = 500;
  hta_time_us(e, &ts, &end);
  EXPECT_EQ(ts, 1700000000000000);
  EXPECT_EQ(end, 1700000000000000);
  // An integer epoch timestamp, "ts": 1695835572955056, "dur": 9: exact as
  // a double; the nearest double to 1695835572955056.128 (what a product
  // d * 1000 in doubles would give as nanoseconds) would be ...056.25, ceil
  // ...057: HTA needs the text's own nanoseconds.
  e.ts_ns = 1695835572955056000;
  e.dur_ns = 9 * kUs;
  hta_time_us(e, &ts, &end);
  EXPECT_EQ(ts, 1695835572955056);
  EXPECT_EQ(end, 1695835572955065);
}

// The exact division must give what a correctly rounding parser gives for
// the decimal text (the oracle: std::from_chars on "W.FFF"), ties included.
TEST(GpuHtaTime, MicrosecondDoubleIsTheParsedText) {
  auto parsed = [](int64_t ns) {
    const uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    char buf[48];
    const int len = std::snprintf(buf, sizeof buf, "%s%llu.%03llu", ns < 0 ? "-" : "",
                                  static_cast<unsigned long long>(mag / 1000), static_cast<unsigned long long>(mag % 1000));
    double v = 0;
    std::from_chars(buf, buf + len, v);
    return v;
  };
  std::mt19937_64 rng(7);
  std::vector<int64_t> cases = {int64_t{1} << 53, (int64_t{1} << 53) + 1, INT64_MAX, INT64_MIN + 1, -(int64_t{1} << 53),
                                1700000000000000123, 1695835572955056000, 1712195495505582988, 9007199254740993000,
                                9007199254740993001, 9223372036854775000};
  // Ties: a quotient exactly halfway between two doubles (0.125 us from a
  // 0.25 us grid near 1.7e15 us), and its neighbours.
  for (int64_t base : {int64_t{1700000000000000000}, int64_t{4503599627370496000}, int64_t{2251799813685248000}})
    for (int64_t d = -1000; d <= 1000; ++d) cases.push_back(base + d);
  for (int i = 0; i < 200000; ++i) {
    const int bits = 53 + static_cast<int>(rng() % 11);
    int64_t v = static_cast<int64_t>(rng() >> (64 - bits));
    if (v < (int64_t{1} << 53)) v += int64_t{1} << 53;
    cases.push_back(rng() & 1 ? v : -v);
  }
  for (int64_t ns : cases) ASSERT_EQ(hta_us_as_double(ns), parsed(ns)) << ns;
}

TEST(GpuHtaRank, DistributedInfoRankElseZero) {
  Trace t;
  EXPECT_EQ(hta_rank(t), 0);
  t.rank.rank = 3;
  EXPECT_EQ(hta_rank(t), 3);
}

// --- temporal and kernel-type breakdowns ---

// Stream 7: gemm [0,10), Memcpy [5,15), elementwise [20,30); stream 8:
// ncclKernel [25,40). A CPU op and a gpu_user_annotation (no stream for HTA)
// around them.
TraceBuilder four_kernels() {
  TraceBuilder b;
  b.add(Cat::kCpuOp, "aten::mm", -5, 100);
  b.add(Cat::kGpuUserAnnotation, "my_region", -50, 200, 7);  // HTA: stream -1
  b.kernel("volta_sgemm_128x64_nn", 0, 10, 7, 1);
  b.add(Cat::kMemcpy, "Memcpy HtoD (Pageable -> Device)", 5, 10, 7, 2);
  b.kernel("void at::native::elementwise_kernel<128, 2>()", 20, 10, 7, 3);
  b.kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 25, 15, 8, 4);
  return b;
}

TEST(GpuHtaTemporal, MergedKernelsIdleComputeNonCompute) {
  TraceBuilder b = four_kernels();
  const TemporalBreakdown t = hta_temporal_breakdown(b.done());
  // All stream != -1 events merged: [0,15) [20,40): kernel time 40 - 0 = 40,
  // run 15 + 20 = 35, idle 5.
  EXPECT_TRUE(t.has_gpu_work);
  EXPECT_EQ(t.rank, 0);
  EXPECT_EQ(t.kernel_time_us, 40);
  EXPECT_EQ(t.idle_time_us, 5);
  // COMPUTATION kernels merged: [0,10) [20,30) = 20.
  EXPECT_EQ(t.compute_time_us, 20);
  // non compute = 40 - 20 - 5.
  EXPECT_EQ(t.non_compute_time_us, 15);
  EXPECT_DOUBLE_EQ(t.idle_time_pctg, 12.5);
  EXPECT_DOUBLE_EQ(t.compute_time_pctg, 50.0);
  EXPECT_DOUBLE_EQ(t.non_compute_time_pctg, 37.5);
}

TEST(GpuHtaTemporal, PercentagesRoundToTwoDecimals) {
  // Kernels [0,1) and [3,6): kernel time 6, idle 2, compute 4.
  TraceBuilder b;
  b.kernel("gemm", 0, 1, 7, 1);
  b.kernel("gemm", 3, 3, 7, 2);
  const TemporalBreakdown t = hta_temporal_breakdown(b.done());
  EXPECT_EQ(t.kernel_time_us, 6);
  EXPECT_DOUBLE_EQ(t.idle_time_pctg, 33.33);     // 33.333...
  EXPECT_DOUBLE_EQ(t.compute_time_pctg, 66.67);  // 66.666...
  EXPECT_DOUBLE_EQ(t.non_compute_time_pctg, 0.0);
}

TEST(GpuHtaTemporal, SyncEventsOnAStreamCountAsNonCompute) {
  // A cuda_sync "Context Sync" on stream 4294967295 (as Kineto writes it):
  // stream != -1, so it is GPU time, of type OTHER (^.*Sync).
  TraceBuilder b;
  b.kernel("gemm", 0, 10, 7, 1);
  b.add(Cat::kSync, "Context Sync", 10, 5, 4294967295LL, 2);
  b.kernel("gemm", 20, 10, 7, 3);
  const TemporalBreakdown t = hta_temporal_breakdown(b.done());
  // [0,15) [20,30): kernel time 30, idle 5, compute 20, non compute 5.
  EXPECT_EQ(t.kernel_time_us, 30);
  EXPECT_EQ(t.idle_time_us, 5);
  EXPECT_EQ(t.compute_time_us, 20);
  EXPECT_EQ(t.non_compute_time_us, 5);
}

TEST(GpuHtaTemporal, NoGpuWorkIsReportedNotComputed) {
  // HTA raises IndexError (merged_kernels.iloc[-1] of nothing).
  TraceBuilder b;
  b.add(Cat::kCpuOp, "aten::add", 0, 10);
  b.t.rank.rank = 34;
  const TemporalBreakdown t = hta_temporal_breakdown(b.done());
  EXPECT_FALSE(t.has_gpu_work);
  EXPECT_EQ(t.rank, 34);
  EXPECT_EQ(t.kernel_time_us, 0);
}

TEST(GpuHtaKernelTypes, OverlapsAreSweptByTypeSet) {
  TraceBuilder b = four_kernels();
  const auto v = hta_kernel_type_breakdown(b.done());
  // Merged per type: COMP [0,10) [20,30); COMM [25,40); MEMORY [5,15).
  // Sweep: 0 +COMP; 5 +MEM; 10 -COMP; 15 -MEM; 20 +COMP; 25 +COMM; 30 -COMP; 40 -COMM.
  //   [0,5) COMP, [5,10) COMP|MEM, [10,15) MEM, [20,25) COMP, [25,30) COMP|COMM, [30,40) COMM.
  const auto m = by_type(v);
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m.at("COMPUTATION").sum_us, 10);
  EXPECT_EQ(m.at("COMMUNICATION").sum_us, 10);
  EXPECT_EQ(m.at("MEMORY").sum_us, 5);
  EXPECT_EQ(m.at("COMPUTATION overlapping MEMORY").sum_us, 5);
  EXPECT_EQ(m.at("COMPUTATION overlapping COMMUNICATION").sum_us, 5);
  // percentage = sum / 35 * 100, one decimal: 28.571 -> 28.6, 14.286 -> 14.3.
  EXPECT_DOUBLE_EQ(m.at("COMPUTATION").percentage, 28.6);
  EXPECT_DOUBLE_EQ(m.at("MEMORY").percentage, 14.3);
  // Sorted by sum, descending.
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0].sum_us, 10);
  EXPECT_EQ(v[1].sum_us, 10);
  EXPECT_EQ(v[4].sum_us, 5);
}

TEST(GpuHtaKernelTypes, OtherKernelsAreLeftOutAndThreeWayOverlapIsNamedInOrder) {
  TraceBuilder b;
  b.kernel("nccl_allreduce", 0, 10, 8, 1);
  b.kernel("gemm", 2, 4, 7, 2);
  b.add(Cat::kMemcpy, "Memcpy DtoD (Device -> Device)", 3, 2, 9, 3);
  b.add(Cat::kSync, "Event Sync", 20, 50, 7, 4);  // OTHER: not analysed
  const auto m = by_type(hta_kernel_type_breakdown(b.done()));
  // [0,2) COMM, [2,3) COMP|COMM, [3,5) all three, [5,6) COMP|COMM, [6,10) COMM.
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.at("COMMUNICATION").sum_us, 6);
  EXPECT_EQ(m.at("COMPUTATION overlapping COMMUNICATION").sum_us, 2);
  EXPECT_EQ(m.at("COMPUTATION overlapping COMMUNICATION overlapping MEMORY").sum_us, 2);
  EXPECT_DOUBLE_EQ(m.at("COMMUNICATION").percentage, 60.0);
}

// --- idle time: get_idle_time_breakdown / _analyze_idle_time_for_stream ---

TEST(GpuHtaIdle, HostWaitKernelWaitOther) {
  TraceBuilder b;
  b.runtime(0, 1);
  b.kernel("k1", 10, 10, 7, 1);  // [10,20): first kernel, "other" with no interval
  b.runtime(5, 2);
  b.kernel("k2", 22, 8, 7, 2);  // gap 2; runtime 5 < prev end 20; 2 < 30: kernel_wait
  b.runtime(40, 3);
  b.kernel("k3", 45, 5, 7, 3);  // gap 15; runtime 40 > prev end 30: host_wait
  b.runtime(41, 4);
  b.kernel("k4", 100, 10, 7, 4);  // gap 50; runtime 41 < 50; 50 >= 30: other
  b.kernel("k5", 115, 5, 7, 99);  // gap 5, no runtime with correlation 99: kernel_wait
  b.runtime(121, 6);
  b.kernel("k6", 150, 5, 7, 6);  // gap 30, runtime 121 > prev end 120: host_wait
  b.runtime(160, 7);
  b.kernel("k7", 185, 5, 7, 7);  // gap 30, runtime 160 > prev end 155: host_wait
  b.runtime(170, 8);
  b.kernel("k8", 220, 5, 7, 8);  // gap 30; runtime 170 < 190; 30 is not < 30: other
  // A cuda_sync on stream 7 is not a kernel category: not in the idle analysis.
  b.add(Cat::kSync, "Stream Sync", 60, 20, 7, 50);
  // Stream 9: a single kernel, no interval at all.
  b.kernel("lonely", 500, 5, 9, 60);
  const auto v = hta_idle_breakdown(b.done());
  ASSERT_EQ(v.size(), 2u);
  const IdleStream& s = v[0];
  EXPECT_EQ(s.stream, 7);
  EXPECT_TRUE(s.has_host_wait && s.has_kernel_wait && s.has_other);
  EXPECT_EQ(s.host_wait_us, 15 + 30 + 30);
  EXPECT_EQ(s.kernel_wait_us, 2 + 5);
  EXPECT_EQ(s.other_us, 50 + 30);
  // Ratios of 162, rounded to 2 decimals: 75/162 = .463, 7/162 = .043, 80/162 = .494.
  EXPECT_DOUBLE_EQ(s.host_wait_ratio, 0.46);
  EXPECT_DOUBLE_EQ(s.kernel_wait_ratio, 0.04);
  EXPECT_DOUBLE_EQ(s.other_ratio, 0.49);
  const IdleStream& lonely = v[1];
  EXPECT_EQ(lonely.stream, 9);
  EXPECT_FALSE(lonely.has_host_wait);
  EXPECT_FALSE(lonely.has_kernel_wait);
  EXPECT_TRUE(lonely.has_other);  // HTA's one row: other, 0, ratio NaN (0/0)
  EXPECT_EQ(lonely.other_us, 0);
  EXPECT_TRUE(std::isnan(lonely.other_ratio));
}

TEST(GpuHtaIdle, ConsecutiveKernelDelayIsAnOption) {
  TraceBuilder b;
  b.kernel("k1", 0, 10, 7, 1);
  b.kernel("k2", 50, 10, 7, 2);  // gap 40, no runtime
  HtaOptions o;
  EXPECT_EQ(hta_idle_breakdown(b.done(), o)[0].other_us, 40);
  o.consecutive_kernel_delay_us = 41;
  EXPECT_EQ(hta_idle_breakdown(b.done(), o)[0].kernel_wait_us, 40);
}

// --- trace.py _filter_irrelevant_gpu_kernels ---

TraceBuilder two_steps() {
  TraceBuilder b;
  b.add(Cat::kUserAnnotation, "ProfilerStep#1", 0, 100);
  b.add(Cat::kUserAnnotation, "ProfilerStep#2", 100, 100);
  b.runtime(10, 1);
  b.kernel("gemm", 20, 10, 7, 1);  // launched in step 1
  b.runtime(110, 2);
  b.kernel("gemm", 120, 30, 7, 2);  // launched in the last step
  return b;
}

TEST(GpuHtaFilter, LastProfilerStepIsDropped) {
  TraceBuilder b = two_steps();
  // Only CPU events starting before the last ProfilerStep (ts 100) stay, and
  // only GPU events whose correlation one of them has: the kernel [120,150)
  // goes.
  const TemporalBreakdown t = hta_temporal_breakdown(b.done());
  EXPECT_EQ(t.kernel_time_us, 10);
  EXPECT_EQ(t.idle_time_us, 0);
  EXPECT_EQ(t.compute_time_us, 10);
  // include_last_profiler_step: CPU events up to the last step's end (200).
  HtaOptions o;
  o.include_last_profiler_step = true;
  const TemporalBreakdown all = hta_temporal_breakdown(b.done(), o);
  EXPECT_EQ(all.kernel_time_us, 130);
  EXPECT_EQ(all.idle_time_us, 90);
}

TEST(GpuHtaFilter, OneStepNameMeansNoFiltering) {
  // Two events but one distinct "ProfilerStep#N" symbol: HTA skips the filter.
  TraceBuilder b = two_steps();
  b.t.names[b.name("ProfilerStep#2")] = "ProfilerStep#1";
  EXPECT_EQ(hta_temporal_breakdown(b.done()).kernel_time_us, 130);
}

TEST(GpuHtaFilter, GpuUserAnnotationStepsCountForTheLastStart) {
  // The GPU-side annotation of ProfilerStep#2 starts at 115, after the CPU
  // one (100): it is not a GPU kernel for HTA (no stream/correlation), so it
  // is among the rows whose latest start is "the last step": CPU events
  // before 115 stay, the runtime at 110 among them, and its kernel.
  TraceBuilder b = two_steps();
  b.add(Cat::kGpuUserAnnotation, "ProfilerStep#2", 115, 40);
  const TemporalBreakdown t = hta_temporal_breakdown(b.done());
  EXPECT_EQ(t.kernel_time_us, 130);
}

TEST(GpuHtaFilter, AKernelIsKeptOncePerCpuEventWithItsCorrelation) {
  // pandas inner merge: a kernel whose correlation two kept CPU events carry
  // (a runtime call and a driver call here) is in the trace twice. Merged
  // intervals do not change; the idle analysis sees the copy right after the
  // original: interval 20 - 30 = -10, runtime 11 (the later CPU event, whose
  // index transform_correlation_to_index writes last) not > 30, -10 < 30:
  // kernel_wait -10.
  TraceBuilder b = two_steps();
  b.runtime(1, 0);
  b.kernel("gemm", 5, 3, 7, 0);  // [5,8)
  b.add(Cat::kDriver, "cuLaunchKernel", 11, 1, -1, 1);
  const auto done = b.done();
  const TemporalBreakdown t = hta_temporal_breakdown(done);
  EXPECT_EQ(t.kernel_time_us, 25);  // [5,8) [20,30)
  EXPECT_EQ(t.idle_time_us, 12);
  const auto idle = hta_idle_breakdown(done);
  ASSERT_EQ(idle.size(), 1u);
  // [5,8) -> [20,30): interval 12, runtime 11 > 8: host_wait.
  EXPECT_EQ(idle[0].host_wait_us, 12);
  EXPECT_EQ(idle[0].kernel_wait_us, -10);
  EXPECT_EQ(idle[0].other_us, 0);
}

TEST(GpuHtaAll, OnePreparationGivesTheSameAnswers) {
  TraceBuilder b = four_kernels();
  const Trace& t = b.done();
  const HtaBreakdowns all = hta_breakdowns(t);
  EXPECT_EQ(all.temporal.idle_time_us, 5);
  EXPECT_EQ(all.kernel_types.size(), 5u);
  ASSERT_EQ(all.idle.size(), 2u);
  // Stream 7: [0,10) [5,15) [20,30): intervals -5 and 5, no runtimes: kernel_wait 0.
  EXPECT_EQ(all.idle[0].kernel_wait_us, 0);
  EXPECT_EQ(all.idle[1].stream, 8);
}

// --- the fixtures against HTA's own output ---

std::string fixture_dir() { return std::string(TORCHNECK_SOURCE_DIR) + "/../shared/fixtures/kineto/"; }

nlohmann::json expected() {
  std::ifstream f(fixture_dir() + "hta_expected.json");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  // Python's json writes NaN, which JSON (and nlohmann) does not have.
  for (size_t at = 0; (at = text.find("NaN", at)) != std::string::npos;) text.replace(at, 3, "null");
  return nlohmann::json::parse(text);
}

double num(const nlohmann::json& v) { return v.is_null() ? std::nan("") : v.get<double>(); }

struct Errors {
  double max_pp = 0;   // percentage points
  double max_rel = 0;  // relative error of microsecond figures
  int compared = 0;
  void us(double ours, double hta, const std::string& what) {
    ++compared;
    const double rel = hta == 0 ? std::fabs(ours) : std::fabs(ours - hta) / std::fabs(hta);
    max_rel = std::max(max_rel, rel);
    // 0.5 %; a figure of 0 us must be 0.
    EXPECT_LE(rel, 0.005) << what << ": ours " << ours << ", HTA " << hta;
  }
  void pp(double ours, double hta, const std::string& what) {
    ++compared;
    if (std::isnan(hta)) {
      EXPECT_TRUE(std::isnan(ours)) << what << ": HTA NaN, ours " << ours;
      return;
    }
    max_pp = std::max(max_pp, std::fabs(ours - hta));
    EXPECT_LE(std::fabs(ours - hta), 0.5) << what << ": ours " << ours << ", HTA " << hta;
  }
};

// HTA rounds every event to whole microseconds from the double that the
// text parses to (ceil(ts), floor(ts + dur)); for epoch timestamps (above
// 2^53 ns) that double is only recoverable from the exact nanoseconds of the
// text, which kineto_trace.h promises. Values from the files' text.
TEST(GpuHtaFixtures, IngestKeepsTheTextsNanoseconds) {
  auto find = [](const Trace& t, int64_t corr, Cat cat) -> const Event* {
    for (const Event& e : t.events)
      if (e.correlation == corr && e.cat == cat) return &e;
    return nullptr;
  };
  const Trace a = kineto::load_trace(fixture_dir() + "a100_alexnet_sync.trace.json.gz");
  const Event* sync = find(a, 96, Cat::kSync);  // "ts": 1695835572955056, "dur": 9
  ASSERT_NE(sync, nullptr);
  EXPECT_EQ(sync->ts_ns, 1695835572955056000);
  EXPECT_EQ(sync->dur_ns, 9000);
  const Trace v = kineto::load_trace(fixture_dir() + "v100_resnet_rank0.trace.json.gz");
  const Event* k = find(v, 135071, Cat::kKernel);  // "ts": 1712195495505582.988, "dur": 4.928
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->ts_ns, 1712195495505582988);
  EXPECT_EQ(k->dur_ns, 4928);
}

TEST(GpuHtaFixtures, MatchHolisticTraceAnalysis) {
  const nlohmann::json exp = expected();
  int traces = 0;
  for (const auto& [file, x] : exp.items()) {
    if (file == "_about") continue;
    SCOPED_TRACE(file);
    const Trace trace = kineto::load_trace(fixture_dir() + file);
    const HtaBreakdowns ours = hta_breakdowns(trace);
    Errors err;
    ++traces;

    if (x.contains("temporal_breakdown")) {
      const auto& h = x["temporal_breakdown"].at(0);
      EXPECT_TRUE(ours.temporal.has_gpu_work);
      EXPECT_EQ(ours.temporal.rank, h["rank"].get<int64_t>());
      err.us(ours.temporal.idle_time_us, num(h["idle_time(us)"]), "idle_time(us)");
      err.us(ours.temporal.compute_time_us, num(h["compute_time(us)"]), "compute_time(us)");
      err.us(ours.temporal.non_compute_time_us, num(h["non_compute_time(us)"]), "non_compute_time(us)");
      err.us(ours.temporal.kernel_time_us, num(h["kernel_time(us)"]), "kernel_time(us)");
      err.pp(ours.temporal.idle_time_pctg, num(h["idle_time_pctg"]), "idle_time_pctg");
      err.pp(ours.temporal.compute_time_pctg, num(h["compute_time_pctg"]), "compute_time_pctg");
      err.pp(ours.temporal.non_compute_time_pctg, num(h["non_compute_time_pctg"]), "non_compute_time_pctg");
    } else {
      // HTA failed before any result: IndexError on a trace without GPU work.
      ASSERT_TRUE(x.contains("error"));
      EXPECT_NE(x["error"].get<std::string>().find("IndexError"), std::string::npos);
      EXPECT_FALSE(ours.temporal.has_gpu_work);
    }

    if (x.contains("idle_time_breakdown")) {
      std::map<int64_t, const IdleStream*> streams;
      for (const auto& s : ours.idle) streams[s.stream] = &s;
      std::map<int64_t, int> hta_rows;
      for (const auto& row : x["idle_time_breakdown"]) {
        const int64_t stream = row["stream"].get<int64_t>();
        const std::string cat = row["idle_category"].get<std::string>();
        const std::string what = "stream " + std::to_string(stream) + " " + cat;
        ASSERT_TRUE(streams.count(stream)) << what;
        const IdleStream& s = *streams[stream];
        EXPECT_EQ(s.rank, row["rank"].get<int64_t>());
        ++hta_rows[stream];
        const int64_t us = cat == "host_wait" ? s.host_wait_us : cat == "kernel_wait" ? s.kernel_wait_us : s.other_us;
        const double ratio = cat == "host_wait" ? s.host_wait_ratio : cat == "kernel_wait" ? s.kernel_wait_ratio : s.other_ratio;
        const bool has = cat == "host_wait" ? s.has_host_wait : cat == "kernel_wait" ? s.has_kernel_wait : s.has_other;
        EXPECT_TRUE(has) << what;
        err.us(static_cast<double>(us), num(row["idle_time"]), what);
        err.pp(100 * ratio, 100 * num(row["idle_time_ratio"]), what + " ratio");
      }
      // The same streams, and the same categories on each.
      EXPECT_EQ(hta_rows.size(), streams.size());
      for (const auto& [stream, n] : hta_rows) {
        const IdleStream& s = *streams[stream];
        EXPECT_EQ(n, int(s.has_host_wait) + int(s.has_kernel_wait) + int(s.has_other)) << "stream " << stream;
      }
    }

    if (x.contains("kernel_type_breakdown")) {
      const auto m = by_type(ours.kernel_types);
      std::map<std::string, bool> seen;
      int64_t prev = INT64_MAX;
      for (const auto& row : x["kernel_type_breakdown"]) {
        const std::string type = row["kernel_type"].get<std::string>();
        seen[type] = true;
        auto it = m.find(type);
        const double sum = it == m.end() ? 0 : static_cast<double>(it->second.sum_us);
        const double pct = it == m.end() ? 0 : it->second.percentage;
        err.us(sum, num(row["sum"]), type);
        err.pp(pct, num(row["percentage"]), type + " %");
      }
      // Any row HTA does not have is empty.
      for (const auto& k : ours.kernel_types) {
        if (!seen.count(k.kernel_type)) err.us(static_cast<double>(k.sum_us), 0, k.kernel_type + " (not in HTA)");
        EXPECT_LE(k.sum_us, prev);  // descending
        prev = k.sum_us;
      }
    }
    std::printf("[ HTA      ] %-55s %3d values, max |pp| %.3f, max rel %.5f%s\n", file.c_str(), err.compared,
                err.max_pp, err.max_rel, x.contains("error") ? " (HTA error: partial)" : "");
  }
  EXPECT_GE(traces, 11);
}

}  // namespace
}  // namespace torchneck::gpu
