// The TensorBoard plugin's numbers (analyze/gpu/tbplugin.h) against the
// plugin's own expectations:
//  - its unit tests (pytorch/kineto tb_plugin/test/test_profiler.py at
//    94979607^): the same events, built here as kineto::Trace objects (the
//    tests' times are µs; the model's are ns, so x1000), the same expected
//    values;
//  - its output on a real trace (shared/fixtures/kineto/
//    tbplugin_resnet50_num_workers_0.expected.jsonl, for
//    v100_resnet50_num_workers_0.trace.json.gz).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analyze/gpu/tbplugin.h"
#include "ingest/kineto_json.h"
#include "trace_runs.h"

namespace torchneck::gpu {
namespace {

using kineto::Cat;
using kineto::Event;
using R = TbRole;

constexpr int64_t kUs = 1000;  // the plugin tests' µs, in the model's ns

// Builds a trace as the plugin's tests write them ("ts"/"dur" in µs).
struct TraceBuilder {
  kineto::Trace t;

  Event& add(Cat cat, const std::string& name, int64_t ts, int64_t dur, int64_t pid, int64_t tid) {
    uint32_t id = 0;
    for (; id < t.names.size(); ++id)
      if (t.names[id] == name) break;
    if (id == t.names.size()) t.names.push_back(name);
    Event e;
    e.cat = cat;
    e.name = id;
    e.ts_ns = ts * kUs;
    e.dur_ns = dur * kUs;
    e.pid = pid;
    e.tid = tid;
    t.events.push_back(e);
    return t.events.back();
  }
  // "cat": "Operator" / "cpu_op", args "External id".
  void op(const std::string& name, int64_t ts, int64_t dur, int64_t ext, int64_t tid = 123) {
    add(Cat::kCpuOp, name, ts, dur, 13721, tid).external_id = ext;
  }
  // "cat": "Runtime", args "correlation", "external id".
  void runtime(const std::string& name, int64_t ts, int64_t dur, int64_t corr, int64_t ext, int64_t tid = 456) {
    Event& e = add(Cat::kRuntime, name, ts, dur, 13721, tid);
    e.correlation = corr;
    e.external_id = ext;
  }
  // "cat": "Kernel" on "stream 7" of GPU `device` (pid == device).
  void kernel(const std::string& name, int64_t ts, int64_t dur, int64_t corr, int64_t ext, int64_t device,
              double blocks_per_sm = -1, double occupancy = -1, int64_t stream = 7) {
    Event& e = add(Cat::kKernel, name, ts, dur, device, stream);
    e.correlation = corr;
    e.external_id = ext;
    e.device = device;
    e.stream = stream;
    e.blocks_per_sm = blocks_per_sm;
    e.est_occupancy = occupancy;
  }
  void device_work(Cat cat, const std::string& name, int64_t ts, int64_t dur, int64_t corr, int64_t ext) {
    Event& e = add(cat, name, ts, dur, 0, 7);
    e.correlation = corr;
    e.external_id = ext;
    e.stream = 7;
  }
  // As the loader leaves it: by start, longer first.
  const kineto::Trace& done() {
    std::stable_sort(t.events.begin(), t.events.end(), [](const Event& a, const Event& b) {
      return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.dur_ns > b.dur_ns;
    });
    return t;
  }
};

// The plugin's steps_costs[i].costs: [Kernel, Memcpy, Memset, Communication,
// Runtime, DataLoader, CpuOp, Other, Total], in µs.
std::vector<int64_t> costs_us(const StepBreakdownTb& s) {
  std::vector<int64_t> c;
  for (int64_t v : s.ns) c.push_back(v / kUs);
  c.push_back(s.total_ns() / kUs);
  return c;
}

const char* kNll = "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>";
const char* kGemm = "void gemmSN_TN_kernel_64addr";

// test_profiler.py TestProfiler.test_all_categories.
TraceBuilder all_categories_trace() {
  TraceBuilder b;
  b.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 180, 2);
  b.op("aten::to", 200, 60, 3);
  b.op("aten::nll_loss_backward", 340, 70, 4, 456);
  b.op("ProfilerStep#1", 50, 400, 1);
  b.device_work(Cat::kMemcpy, "Memcpy HtoD (Pageable -> Device)", 405, 10, 334, 4);
  b.runtime("cudaMemcpyAsync", 360, 20, 334, 4);
  b.device_work(Cat::kMemset, "Memset (Device)", 420, 5, 40344, 4);
  b.runtime("cudaMemsetAsync", 390, 10, 40344, 4);
  b.kernel(kNll, 430, 15, 40348, 4, 0);
  b.runtime("cudaLaunchKernel", 405, 5, 40348, 4);
  b.done();
  return b;
}

TEST(GpuTbPlugin, AllCategories) {
  const TraceBuilder b = all_categories_trace();
  const TbOverview o = tb_overview(b.t);

  EXPECT_TRUE(o.has_runtime);
  EXPECT_TRUE(o.has_kernel);
  EXPECT_TRUE(o.has_memcpy_or_memset);
  ASSERT_EQ(o.steps.size(), 1u);
  const StepBreakdownTb& s = o.steps[0];
  EXPECT_EQ(s.name, "1");
  EXPECT_EQ(s[R::kKernel], 15 * kUs);
  EXPECT_EQ(s[R::kMemcpy], 10 * kUs);
  EXPECT_EQ(s[R::kMemset], 5 * kUs);
  EXPECT_EQ(s[R::kRuntime], 30 * kUs);
  EXPECT_EQ(s[R::kDataLoader], 180 * kUs);
  EXPECT_EQ(s[R::kCpuExec], 35 * kUs);
  EXPECT_EQ(s[R::kOther], 125 * kUs);
}

// test_runtime_called_by_profilerstep: a runtime directly under the step.
TEST(GpuTbPlugin, RuntimeCalledByProfilerStep) {
  TraceBuilder b;
  b.op("ProfilerStep#1", 100, 300, 2, 456);
  b.runtime("cudaLaunchKernel", 130, 20, 335, 2);
  b.kernel(kGemm, 220, 8, 335, 2, 0);
  const auto steps = tb_step_breakdown(b.done());
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0][R::kKernel], 8 * kUs);
  EXPECT_EQ(steps[0][R::kRuntime], 20 * kUs);
  EXPECT_EQ(steps[0][R::kCpuExec], 0);
  EXPECT_EQ(steps[0][R::kOther], (300 - 8 - 20) * kUs);
}

// test_no_profilerstep: without ProfilerStep, the host span is step "0",
// extended to the device work it launched.
TEST(GpuTbPlugin, NoProfilerStep) {
  TraceBuilder b;
  b.op("aten::to", 100, 60, 3);
  b.op("aten::nll_loss_backward", 300, 70, 4, 456);
  b.kernel(kNll, 320, 100, 40348, 4, 0);
  b.runtime("cudaLaunchKernel", 310, 20, 40348, 4);
  const TbOverview o = tb_overview(b.done());
  EXPECT_TRUE(o.has_runtime);
  EXPECT_TRUE(o.has_kernel);
  EXPECT_FALSE(o.has_memcpy_or_memset);
  ASSERT_EQ(o.steps.size(), 1u);
  const StepBreakdownTb& s = o.steps[0];
  EXPECT_EQ(s.name, "0");
  EXPECT_EQ(s[R::kKernel], 100 * kUs);
  EXPECT_EQ(s[R::kMemcpy], 0);
  EXPECT_EQ(s[R::kMemset], 0);
  EXPECT_EQ(s[R::kRuntime], (320 - 310) * kUs);
  EXPECT_EQ(s[R::kDataLoader], 0);
  EXPECT_EQ(s[R::kCpuExec], (60 + (310 - 300)) * kUs);
  EXPECT_EQ(s[R::kOther], (300 - (100 + 60)) * kUs);
  EXPECT_EQ(s.total_ns(), ((320 + 100) - 100) * kUs);
}

// test_multiple_profilersteps_no_overlap.
TEST(GpuTbPlugin, MultipleProfilerStepsNoOverlap) {
  TraceBuilder b;
  b.op("ProfilerStep#1", 100, 200, 1);
  b.op("aten::to", 200, 60, 2);
  b.op("ProfilerStep#2", 350, 150, 3);
  b.op("aten::mm", 360, 50, 4);
  b.device_work(Cat::kMemcpy, "Memcpy HtoD (Pageable -> Device)", 280, 40, 334, 2);
  b.runtime("cudaMemcpyAsync", 250, 5, 334, 2, 123);
  b.kernel(kNll, 410, 200, 40348, 4, 0);
  b.runtime("cudaLaunchKernel", 400, 5, 40348, 4, 123);
  const TbOverview o = tb_overview(b.done());
  ASSERT_EQ(o.steps.size(), 2u);
  const StepBreakdownTb& s1 = o.steps[0];
  EXPECT_EQ(s1[R::kKernel], 0);
  EXPECT_EQ(s1[R::kMemcpy], 40 * kUs);
  EXPECT_EQ(s1[R::kMemset], 0);
  EXPECT_EQ(s1[R::kRuntime], 5 * kUs);
  EXPECT_EQ(s1[R::kDataLoader], 0);
  EXPECT_EQ(s1[R::kCpuExec], (60 - 5) * kUs);
  EXPECT_EQ(s1[R::kOther], (200 - 60 - 20) * kUs);
  EXPECT_EQ(s1.total_ns(), (320 - 100) * kUs);  // device side takes effect
  const StepBreakdownTb& s2 = o.steps[1];
  EXPECT_EQ(s2[R::kKernel], 200 * kUs);
  EXPECT_EQ(s2[R::kMemcpy], 0);
  EXPECT_EQ(s2[R::kMemset], 0);
  EXPECT_EQ(s2[R::kRuntime], 5 * kUs);
  EXPECT_EQ(s2[R::kDataLoader], 0);
  EXPECT_EQ(s2[R::kCpuExec], (50 - 5) * kUs);
  EXPECT_EQ(s2[R::kOther], (360 - 350) * kUs);
  EXPECT_EQ(s2.total_ns(), (610 - 350) * kUs);
  EXPECT_DOUBLE_EQ(o.avg_total_ns, ((320 - 100) + (610 - 350)) / 2.0 * kUs);
}

// test_multiple_profilersteps_with_overlap: device work launched by the
// previous step delays the next step's start.
TEST(GpuTbPlugin, MultipleProfilerStepsWithOverlap) {
  TraceBuilder b;
  b.op("ProfilerStep#1", 100, 200, 1);
  b.op("aten::to", 200, 60, 2);
  b.op("ProfilerStep#2", 350, 150, 3);
  b.op("aten::mm", 360, 50, 4);
  b.kernel(kNll, 150, 90, 123, 123, 0);
  b.device_work(Cat::kMemcpy, "Memcpy HtoD (Pageable -> Device)", 280, 100, 334, 2);
  b.runtime("cudaMemcpyAsync", 250, 5, 334, 2, 123);
  b.kernel(kNll, 410, 200, 40348, 4, 0);
  b.runtime("cudaLaunchKernel", 400, 5, 40348, 4, 123);
  const TbOverview o = tb_overview(b.done());
  ASSERT_EQ(o.steps.size(), 2u);
  const StepBreakdownTb& s1 = o.steps[0];
  EXPECT_EQ(s1[R::kKernel], 0);
  EXPECT_EQ(s1[R::kMemcpy], 100 * kUs);
  EXPECT_EQ(s1[R::kMemset], 0);
  EXPECT_EQ(s1[R::kRuntime], 5 * kUs);
  EXPECT_EQ(s1[R::kDataLoader], 0);
  EXPECT_EQ(s1[R::kCpuExec], ((200 + 60) - (150 + 90) - 5) * kUs);
  EXPECT_EQ(s1[R::kOther], (280 - (200 + 60)) * kUs);
  EXPECT_EQ(s1.total_ns(), ((280 + 100) - (150 + 90)) * kUs);
  const StepBreakdownTb& s2 = o.steps[1];
  EXPECT_EQ(s2[R::kKernel], 200 * kUs);
  EXPECT_EQ(s2[R::kMemcpy], 0);
  EXPECT_EQ(s2[R::kMemset], 0);
  EXPECT_EQ(s2[R::kRuntime], 5 * kUs);
  EXPECT_EQ(s2[R::kDataLoader], 0);
  EXPECT_EQ(s2[R::kCpuExec], ((280 + 100) - 360 + (410 - 405)) * kUs);
  EXPECT_EQ(s2[R::kOther], 0);
  EXPECT_EQ(s2.total_ns(), (610 - (280 + 100)) * kUs);
}

// test_last_steps_no_kernel: trailing steps that launched nothing are dropped.
TEST(GpuTbPlugin, LastStepsWithoutKernelsAreDropped) {
  TraceBuilder b;
  b.op("ProfilerStep#1", 100, 200, 1);
  b.op("aten::to", 120, 10, 2);
  b.op("ProfilerStep#2", 300, 100, 3);
  b.op("ProfilerStep#3", 400, 50, 4);
  b.kernel(kNll, 90, 20, 123, 123, 0);
  b.runtime("cudaMemcpyAsync", 125, 5, 334, 2, 123);
  b.kernel(kNll, 150, 180, 334, 2, 0);
  const TbOverview o = tb_overview(b.done());
  ASSERT_EQ(o.steps.size(), 1u);
  EXPECT_EQ(o.removed_tail_steps, 2);
  EXPECT_EQ(o.steps[0].total_ns(), ((150 + 180) - (90 + 20)) * kUs);
}

// test_pure_cpu.
TEST(GpuTbPlugin, PureCpu) {
  TraceBuilder b;
  b.op("ProfilerStep#1", 100, 200, 1);
  b.op("aten::to", 120, 10, 2);
  b.op("ProfilerStep#2", 300, 100, 3);
  b.op("aten::mm", 350, 40, 4);
  const TbOverview o = tb_overview(b.done());
  EXPECT_FALSE(o.show_gpu_columns());
  ASSERT_EQ(o.steps.size(), 2u);
  EXPECT_EQ(costs_us(o.steps[0]), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 10, 200 - 10, 200}));
  EXPECT_EQ(costs_us(o.steps[1]), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 40, 100 - 40, 100}));
}

// test_gpu_utilization: GPU utilization, est. SM efficiency, occupancy, their
// timelines, and the kernel table's weighted means.
TraceBuilder gpu_utilization_trace() {
  TraceBuilder b;
  b.op("aten::mat_mul", 100, 100, 2, 456);
  b.op("aten::mm", 120, 70, 4, 456);
  b.kernel(kNll, 130, 10, 334, 4, 1, 0.5, 0.6);
  b.runtime("cudaLaunchKernel", 120, 0, 334, 4);
  b.kernel(kGemm, 135, 15, 335, 2, 1, 0.6, 0.1, 8);
  b.kernel(kGemm, 150, 0, 335, 2, 1, 0.3, 0.2, 8);
  b.runtime("cudaLaunchKernel", 120, 0, 335, 2);
  b.kernel(kNll, 145, 25, 336, 4, 1, 0.3, 1.0);
  b.runtime("cudaLaunchKernel", 125, 3, 336, 4);
  b.kernel(kNll, 200, 20, 337, 2, 1, 10.5, 0.3);
  b.runtime("cudaLaunchKernel", 195, 1, 337, 2);
  b.done();
  return b;
}

TEST(GpuTbPlugin, GpuUtilizationSmEfficiencyOccupancy) {
  const TraceBuilder b = gpu_utilization_trace();
  const TbGpuMetrics m = tb_gpu_metrics(b.t);
  ASSERT_EQ(m.devices.size(), 1u);
  const TbDeviceMetrics& d = m.devices[0];
  EXPECT_EQ(d.device, 1);
  EXPECT_NEAR(d.utilization, (40.0 + 20) / 120, 1e-7);
  ASSERT_TRUE(d.sm_efficiency.has_value());
  EXPECT_NEAR(*d.sm_efficiency,
              (0.5 * (135 - 130) + 1.0 * (140 - 135) + 0.6 * (145 - 140) + 0.9 * (150 - 145) + 0.3 * (170 - 150) +
               1.0 * (220 - 200)) /
                  (220 - 100),
              1e-7);
  ASSERT_TRUE(d.achieved_occupancy.has_value());
  EXPECT_NEAR(*d.achieved_occupancy, (0.6 * 10 + 0.1 * 15 + 1.0 * 25 + 0.3 * 20) / (10 + 15 + 25 + 20), 1e-7);

  const std::vector<std::pair<int64_t, double>> util_expected = {
      {100, 0}, {110, 0}, {120, 0}, {130, 1.0}, {140, 1.0}, {150, 1.0}, {160, 1.0},
      {170, 0}, {180, 0}, {190, 0}, {200, 1.0}, {210, 1.0}, {220, 0}};
  ASSERT_EQ(d.util_timeline.size(), util_expected.size());
  for (size_t i = 0; i < util_expected.size(); ++i) {
    EXPECT_EQ(d.util_timeline[i].first, util_expected[i].first * kUs) << i;
    EXPECT_NEAR(d.util_timeline[i].second, util_expected[i].second, 1e-7) << i;
  }
  // (start, value), then (end, 0), per range.
  const std::vector<std::pair<int64_t, double>> sm_expected = {
      {130, 0.5}, {135, 0}, {135, 1.0}, {140, 0}, {140, 0.6}, {145, 0}, {145, 0.9},
      {150, 0},   {150, 0.3}, {170, 0}, {170, 0}, {200, 0}, {200, 1.0}, {220, 0}};
  // The plugin's list holds 7 ranges here; the 6th, (170, 200, ~0) comes
  // from float residue (0.5+0.6+0.3+0.3 ... -0.3 > 0) and has value ~0.
  ASSERT_EQ(d.sm_efficiency_ranges.size() * 2, sm_expected.size());
  for (size_t i = 0; i < d.sm_efficiency_ranges.size(); ++i) {
    EXPECT_EQ(d.sm_efficiency_ranges[i].start_ns, sm_expected[2 * i].first * kUs) << i;
    EXPECT_NEAR(d.sm_efficiency_ranges[i].value, sm_expected[2 * i].second, 1e-7) << i;
    EXPECT_EQ(d.sm_efficiency_ranges[i].end_ns, sm_expected[2 * i + 1].first * kUs) << i;
  }
}

// test_gpu_utilization's kernel_stat rows: "The kernel with zero 'dur'
// should be ignored" (weight 0).
TEST(GpuTbPlugin, KernelTableWeightedMeans) {
  const TraceBuilder b = gpu_utilization_trace();
  const auto stats = tb_kernel_stats(b.t);
  int found = 0;
  for (const TbKernelStat& k : stats) {
    if (k.name == kGemm) {
      EXPECT_NEAR(k.blocks_per_sm, 0.6, 1e-7);
      EXPECT_NEAR(k.occupancy, 0.1, 1e-7);
      ++found;
    } else if (k.name == kNll) {
      EXPECT_NEAR(k.blocks_per_sm, (0.5 * 10 + 0.3 * 25 + 10.5 * 20) / (10 + 25 + 20), 1e-7);
      EXPECT_NEAR(k.occupancy, (0.6 * 10 + 1.0 * 25 + 0.3 * 20) / (10 + 25 + 20), 1e-7);
      ++found;
    }
  }
  EXPECT_EQ(found, 2);
}

// test_gpu_utilization_kernel_out_of_step: kernels outside the steps count
// for none of the three metrics, but still in the kernel table.
TEST(GpuTbPlugin, KernelsOutOfStep) {
  TraceBuilder b;
  b.op("aten::mat_mul", 10, 10, 1, 456);
  b.op("aten::mm", 120, 70, 3, 456);
  b.op("aten::mm", 220, 20, 4, 456);
  b.op("ProfilerStep#2", 100, 100, 2, 456);
  b.kernel(kNll, 60, 20, 334, 1, 1, 0.5, 0.6);
  b.runtime("cudaLaunchKernel", 15, 5, 334, 1);
  b.kernel(kNll, 240, 25, 337, 4, 1, 10.5, 0.3);
  b.runtime("cudaLaunchKernel", 230, 10, 337, 4);
  const TbGpuMetrics m = tb_gpu_metrics(b.done());
  ASSERT_EQ(m.devices.size(), 1u);
  EXPECT_NEAR(m.devices[0].utilization, 0.0, 1e-12);
  EXPECT_FALSE(m.devices[0].sm_efficiency.has_value());
  EXPECT_FALSE(m.devices[0].achieved_occupancy.has_value());
  const auto stats = tb_kernel_stats(b.t);
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_NEAR(stats[0].blocks_per_sm, (20 * 0.5 + 25 * 10.5) / (20 + 25), 1e-7);
  EXPECT_NEAR(stats[0].occupancy, (20 * 0.6 + 25 * 0.3) / (20 + 25), 1e-7);
}

// TestDistributed.test_distributed_nccl: kernels of nccl:* ops are
// Communication, and so are the nccl:* ops themselves.
TEST(GpuTbPlugin, DistributedNccl) {
  {
    TraceBuilder b;
    b.op("nccl:broadcast", 0, 75, 146, 23803);
    b.kernel("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)", 16, 16, 28506, 146, 0, -1, -1, 16);
    b.op("aten::add_", 100, 20, 24504, 23803);
    b.kernel("void at::native::vectorized_elementwise_kernel", 130, 161, 99765, 24504, 0);
    b.op("nccl:all_reduce", 160, 75, 2513, 25166);
    b.kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 162, 1556, 33218, 2513, 0, -1, -1, 16);
    const TbOverview o = tb_overview(b.done());
    EXPECT_TRUE(o.has_communication);
    ASSERT_EQ(o.steps.size(), 1u);
    EXPECT_EQ(costs_us(o.steps[0]), (std::vector<int64_t>{105, 0, 0, 75, 0, 0, 20, 35, 235}));
  }
  {
    TraceBuilder b;
    b.op("nccl:broadcast", 0, 20, 146, 23803);
    b.kernel("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)", 8, 31, 28506, 146, 0, -1, -1, 16);
    b.op("aten::add_", 25, 20, 24504, 23803);
    b.kernel("void at::native::vectorized_elementwise_kernel", 30, 161, 99765, 24504, 0);
    b.op("nccl:all_reduce", 160, 75, 2513, 25166);
    b.kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 562, 1058, 33218, 2513, 0, -1, -1, 16);
    const TbOverview o = tb_overview(b.done());
    EXPECT_TRUE(o.has_communication);
    ASSERT_EQ(o.steps.size(), 1u);
    EXPECT_EQ(o.steps[0][R::kCommunication], 74 * kUs);
  }
}

// test_distributed_gloo_gpu and test_distributed_gloo_cpu: gloo:* ops are
// Communication; with kernels (gpu) or without (cpu).
void gloo_worker(TraceBuilder& b, const std::vector<std::array<int64_t, 4>>& bcast_allreduce, int64_t add_dur,
                 std::array<int64_t, 2> mul_or_kernel, bool gpu) {
  // bcast_allreduce rows: {is_all_reduce, ts, dur, tid}
  int64_t ext = 165;
  for (const auto& r : bcast_allreduce)
    b.op(r[0] ? "gloo:all_reduce" : "gloo:broadcast", r[1], r[2], ext++, r[3]);
  b.op("aten::add_", 0, add_dur, 24504, 23800);
  if (gpu) b.kernel("void at::native::vectorized_elementwise_kernel", mul_or_kernel[0], mul_or_kernel[1], 99765, 24504, 0);
  else b.op("aten::mul", mul_or_kernel[0], mul_or_kernel[1], 24505, 23800);
}

TEST(GpuTbPlugin, DistributedGloo) {
  const std::vector<std::array<int64_t, 4>> w0 = {
      {0, 16, 38, 23803}, {0, 25, 36, 23805}, {0, 66, 18, 23803}, {1, 110, 18, 23805}, {1, 120, 36, 23803}};
  const std::vector<std::array<int64_t, 4>> w1 = {
      {0, 20, 28, 23803}, {0, 28, 30, 23805}, {0, 77, 6, 23803}, {1, 88, 38, 23805}, {1, 130, 16, 23803}};
  struct Case {
    const std::vector<std::array<int64_t, 4>>* ops;
    int64_t add_dur;
    std::array<int64_t, 2> other;
    bool gpu;
    std::vector<int64_t> expected;
  };
  const std::vector<Case> cases = {
      {&w0, 20, {30, 101}, true, {101, 0, 0, 39, 0, 0, 16, 0, 156}},   // gloo_gpu worker0
      {&w1, 30, {70, 70}, true, {70, 0, 0, 44, 0, 0, 20, 12, 146}},    // gloo_gpu worker1
      {&w0, 20, {30, 101}, false, {0, 0, 0, 109, 0, 0, 47, 0, 156}},   // gloo_cpu worker0
      {&w1, 30, {70, 70}, false, {0, 0, 0, 98, 0, 0, 36, 12, 146}},    // gloo_cpu worker1
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    TraceBuilder b;
    gloo_worker(b, *cases[i].ops, cases[i].add_dur, cases[i].other, cases[i].gpu);
    const TbOverview o = tb_overview(b.done());
    EXPECT_TRUE(o.has_communication) << i;
    ASSERT_EQ(o.steps.size(), 1u) << i;
    EXPECT_EQ(costs_us(o.steps[0]), cases[i].expected) << i;
  }
}

// test_distributed_nccl_user_annotation_has_communication (kineto issue 640).
TEST(GpuTbPlugin, NcclUserAnnotationIsCommunication) {
  TraceBuilder b;
  b.add(Cat::kUserAnnotation, "nccl:all_reduce", 1686070155939447, 71, 128, 999).external_id = 647;
  const TbOverview o = tb_overview(b.done());
  EXPECT_TRUE(o.has_communication);
}

// TestDataPipe.test_datapipe: enumerate(DataPipe)#... is DataLoader time
// (role range [100, 123]; here the whole step "0").
TEST(GpuTbPlugin, DataPipeIsDataLoader) {
  TraceBuilder b;
  b.op("enumerate(DataPipe)#ShufflerIterDataPipe", 100, 23, 34, 7557);
  const TbOverview o = tb_overview(b.done());
  ASSERT_EQ(o.steps.size(), 1u);
  EXPECT_EQ(o.steps[0][R::kDataLoader], 23 * kUs);
  EXPECT_EQ(o.steps[0].total_ns(), 23 * kUs);
}

// ---- the Operator view (op tree) ----------------------------------------

std::map<std::string, TbOpStat> ops_by_name(const kineto::Trace& t) {
  std::map<std::string, TbOpStat> m;
  for (const auto& s : tb_op_stats(t)) m[s.name] = s;
  return m;
}

// test_all_categories' op list and kernel_stat.
TEST(GpuTbPlugin, OpsAllCategories) {
  const TraceBuilder b = all_categories_trace();
  const auto ops = ops_by_name(b.t);
  ASSERT_EQ(ops.size(), 2u);  // not the DataLoader nor the ProfilerStep
  const TbOpStat& to = ops.at("aten::to");
  EXPECT_EQ(to.calls, 1);
  EXPECT_EQ(to.host_total_ns, 60 * kUs);
  EXPECT_EQ(to.device_total_ns, 0);
  EXPECT_EQ(to.host_self_ns, 60 * kUs);
  EXPECT_EQ(to.device_self_ns, 0);
  const TbOpStat& nll = ops.at("aten::nll_loss_backward");
  EXPECT_EQ(nll.calls, 1);
  EXPECT_EQ(nll.host_total_ns, 70 * kUs);
  EXPECT_EQ(nll.device_total_ns, 30 * kUs);
  EXPECT_EQ(nll.host_self_ns, (70 - 20 - 10 - 5) * kUs);
  EXPECT_EQ(nll.device_self_ns, 30 * kUs);
  const auto k = tb_kernel_stats(b.t);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].calls, 1);
  EXPECT_EQ(k[0].total_ns, 15 * kUs);
  EXPECT_EQ(k[0].mean_ns, 15.0 * kUs);
  EXPECT_EQ(k[0].min_ns, 15 * kUs);
  EXPECT_EQ(k[0].max_ns, 15 * kUs);
}

// test_external_id: runtimes go to ops by External id, not by time.
TEST(GpuTbPlugin, OpsRuntimesByExternalId) {
  TraceBuilder b;
  b.op("aten::mat_mul", 100, 100, 2, 456);
  b.op("aten::mm", 120, 70, 4, 456);
  b.kernel(kNll, 130, 5, 334, 4, 0);
  b.runtime("cudaLaunchKernel", 120, 0, 334, 4);
  b.kernel(kNll, 130, 6, 335, 2, 0);
  b.runtime("cudaLaunchKernel", 120, 0, 335, 2);
  b.kernel(kNll, 130, 7, 336, 4, 0);
  b.runtime("cudaLaunchKernel", 190, 0, 336, 4);
  b.kernel(kNll, 130, 8, 337, 2, 0);
  b.runtime("cudaLaunchKernel", 190, 0, 337, 2);
  const auto ops = ops_by_name(b.done());
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops.at("aten::mat_mul").device_total_ns, (5 + 6 + 7 + 8) * kUs);
  EXPECT_EQ(ops.at("aten::mat_mul").device_self_ns, (6 + 8) * kUs);
  EXPECT_EQ(ops.at("aten::mm").device_total_ns, (5 + 7) * kUs);
  EXPECT_EQ(ops.at("aten::mm").device_self_ns, (5 + 7) * kUs);
}

// test_operator_relation: same start, or same end, still nest.
TEST(GpuTbPlugin, OpsNestWithSameStartOrEnd) {
  for (int64_t mm_start : {100, 130}) {
    TraceBuilder b;
    b.op("aten::mat_mul", 100, 100, 2, 456);
    b.op("aten::mm", mm_start, 70, 4, 456);
    const auto ops = ops_by_name(b.done());
    ASSERT_EQ(ops.size(), 2u);
    EXPECT_EQ(ops.at("aten::mat_mul").host_self_ns, (100 - 70) * kUs) << mm_start;
    EXPECT_EQ(ops.at("aten::mm").host_self_ns, 70 * kUs) << mm_start;
  }
}

// test_remove_dup_nodes: nested same-name ops collapse into the outer one,
// which takes the innermost's runtimes.
TEST(GpuTbPlugin, OpsRemoveDupNodes) {
  TraceBuilder b;
  b.op("aten::mm", 100, 100, 2, 456);
  b.op("aten::mm", 110, 80, 3, 456);
  b.op("aten::mm", 120, 60, 4, 456);
  b.runtime("cudaLaunchKernel", 130, 20, 335, 4);
  b.kernel(kGemm, 220, 8, 335, 4, 0);
  const auto ops = tb_op_stats(b.done());
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].calls, 1);
  EXPECT_EQ(ops[0].device_self_ns, 8 * kUs);
}

// test_top_level_runtime: a runtime whose External id matches no op.
TEST(GpuTbPlugin, OpsTopLevelRuntime) {
  TraceBuilder b;
  b.op("aten::mm", 100, 100, 2, 123);
  b.runtime("cudaLaunchKernel", 130, 20, 335, 335);
  b.kernel(kGemm, 220, 8, 335, 335, 0);
  const auto ops = tb_op_stats(b.done());
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].device_total_ns, 0);
  EXPECT_EQ(ops[0].device_self_ns, 0);
  ASSERT_EQ(tb_kernel_stats(b.t).size(), 1u);
  EXPECT_EQ(tb_kernel_stats(b.t)[0].calls, 1);
}

// test_runtime_called_by_profilerstep: the ProfilerStep is no operator.
TEST(GpuTbPlugin, OpsProfilerStepIsNoOperator) {
  TraceBuilder b;
  b.op("ProfilerStep#1", 100, 300, 2, 456);
  b.runtime("cudaLaunchKernel", 130, 20, 335, 2);
  b.kernel(kGemm, 220, 8, 335, 2, 0);
  EXPECT_TRUE(tb_op_stats(b.done()).empty());
  ASSERT_EQ(tb_kernel_stats(b.t).size(), 1u);
  EXPECT_EQ(tb_kernel_stats(b.t)[0].calls, 1);
}

// test_runtime_launch_multipe_kernels: one runtime, two kernels.
TEST(GpuTbPlugin, OpsRuntimeLaunchingTwoKernels) {
  TraceBuilder b;
  b.op("Broadcast", 100, 300, 2, 456);
  b.runtime("cudaLaunchCooperativeKernelMultiDevice", 130, 20, 335, 2);
  b.kernel("ncclBroadcastRingLLKernel_copy_i8(ncclColl)", 160, 120318, 335, 2, 0, -1, -1, 13);
  b.kernel("ncclBroadcastRingLLKernel_copy_i8(ncclColl)", 170, 132800, 335, 2, 0, -1, -1, 22);
  const auto ops = tb_op_stats(b.done());
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].device_total_ns, (120318 + 132800) * kUs);
  ASSERT_EQ(tb_kernel_stats(b.t).size(), 1u);
  EXPECT_EQ(tb_kernel_stats(b.t)[0].calls, 2);
}

// test_self_time.
TEST(GpuTbPlugin, OpsSelfTime) {
  TraceBuilder b;
  b.op("aten::mat_mul", 100, 100, 2, 456);
  b.op("aten::mm", 120, 40, 4, 456);
  b.kernel(kNll, 155, 20, 334, 4, 0);
  b.runtime("cudaLaunchKernel", 150, 10, 334, 4);
  b.kernel(kNll, 210, 16, 335, 2, 0);
  b.runtime("cudaLaunchKernel", 170, 25, 335, 2);
  const auto ops = ops_by_name(b.done());
  ASSERT_EQ(ops.size(), 2u);
  const TbOpStat& mat = ops.at("aten::mat_mul");
  EXPECT_EQ(mat.host_total_ns, 100 * kUs);
  EXPECT_EQ(mat.device_total_ns, (20 + 16) * kUs);
  EXPECT_EQ(mat.host_self_ns, (100 - 40 - 25) * kUs);
  EXPECT_EQ(mat.device_self_ns, 16 * kUs);
  const TbOpStat& mm = ops.at("aten::mm");
  EXPECT_EQ(mm.host_total_ns, 40 * kUs);
  EXPECT_EQ(mm.device_total_ns, 20 * kUs);
  EXPECT_EQ(mm.host_self_ns, 30 * kUs);
  EXPECT_EQ(mm.device_self_ns, 20 * kUs);
}

// TestDataPipe.test_datapipe: the DataPipe op is no operator row.
TEST(GpuTbPlugin, OpsDataPipeIsNoOperator) {
  TraceBuilder b;
  b.op("enumerate(DataPipe)#ShufflerIterDataPipe", 100, 23, 34, 7557);
  EXPECT_TRUE(tb_op_stats(b.done()).empty());
}

// ---- the plugin's output on a real trace --------------------------------

std::string fixture(const std::string& name) { return std::string(TORCHNECK_SOURCE_DIR "/../shared/fixtures/kineto/") + name; }

std::vector<nlohmann::json> oracle_lines() {
  std::ifstream in(fixture("tbplugin_resnet50_num_workers_0.expected.jsonl"));
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

struct Fixture : ::testing::Test {
  static void SetUpTestSuite() {
    trace_ = new kineto::Trace(kineto::load_trace(fixture("v100_resnet50_num_workers_0.trace.json.gz")));
    oracle_ = new std::vector<nlohmann::json>(oracle_lines());
  }
  static void TearDownTestSuite() {
    delete trace_;
    delete oracle_;
  }
  static kineto::Trace* trace_;
  static std::vector<nlohmann::json>* oracle_;
};
kineto::Trace* Fixture::trace_ = nullptr;
std::vector<nlohmann::json>* Fixture::oracle_ = nullptr;

using GpuTbPluginResnet50 = Fixture;

// Line 1 "steps": per step and category, within 1 %.
// Each for the overview alone and for it read with the GPU metrics in one
// pass (tb_overview_and_metrics, as `torchneck analyze` does).
class GpuTbPluginResnet50Both : public Fixture, public ::testing::WithParamInterface<bool> {};
INSTANTIATE_TEST_SUITE_P(Alone, GpuTbPluginResnet50Both, ::testing::Values(false));
INSTANTIATE_TEST_SUITE_P(Together, GpuTbPluginResnet50Both, ::testing::Values(true));

TEST_P(GpuTbPluginResnet50Both, StepBreakdownMatchesThePlugin) {
  ASSERT_GE(oracle_->size(), 1u);
  const nlohmann::json& steps = (*oracle_)[0].at("steps");
  const TbOverview o = GetParam() ? tb_overview_and_metrics(*trace_).overview : tb_overview(*trace_);
  // Column names, in order, without the tooltips.
  std::vector<std::string> cols;
  for (const auto& c : steps.at("columns"))
    if (c.contains("name")) cols.push_back(c.at("name").get<std::string>());
  std::vector<std::string> ours = {"Step"};
  for (int r = 0; r < kTbRoleCount; ++r) {
    const auto role = static_cast<TbRole>(r);
    const bool gpu_col = role == R::kKernel || role == R::kMemcpy || role == R::kMemset || role == R::kRuntime;
    if ((gpu_col && !o.show_gpu_columns()) || (role == R::kCommunication && !o.has_communication)) continue;
    ours.push_back(tb_role_name(role));
  }
  ASSERT_EQ(ours, cols);

  const auto& rows = steps.at("rows");
  ASSERT_EQ(o.steps.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const StepBreakdownTb& s = o.steps[i];
    EXPECT_EQ(s.name, row[0].get<std::string>());
    double total = 0;
    size_t k = 1;
    for (size_t c = 1; c < cols.size(); ++c, k += 2) {
      const double expected = row[k].get<double>();
      total += expected;
      TbRole role = R::kOther;
      for (int r = 0; r < kTbRoleCount; ++r)
        if (cols[c] == tb_role_name(static_cast<TbRole>(r))) role = static_cast<TbRole>(r);
      const double got = s.us(role);
      EXPECT_NEAR(got, expected, 0.01 * expected) << "step " << s.name << " " << cols[c];
    }
    EXPECT_NEAR(s.total_us(), total, 0.01 * total) << "step " << s.name;
  }

  // "performance": Average Step Time and its parts, round()ed.
  const auto& perf = (*oracle_)[0].at("performance")[0];
  EXPECT_NEAR(o.avg_total_ns / 1e3, perf.at("value").get<double>(), 1.0);
  for (const auto& child : perf.at("children")) {
    const std::string name = child.at("name").get<std::string>();
    const double v = child.at("value").get<double>();
    for (int r = 0; r < kTbRoleCount; ++r) {
      if (name == tb_role_name(static_cast<TbRole>(r))) {
        EXPECT_NEAR(o.avg_ns[r] / 1e3, v, std::max(1.0, 0.01 * v)) << name;
      }
    }
  }
}

// Line 1 "gpu_metrics": the GPU Summary's strings, e.g. "55.51 %".
TEST_P(GpuTbPluginResnet50Both, GpuSummaryMatchesThePlugin) {
  const TbGpuMetrics m = GetParam() ? tb_overview_and_metrics(*trace_).metrics : tb_gpu_metrics(*trace_);
  std::map<std::string, double> expected;
  for (const auto& item : (*oracle_)[0].at("gpu_metrics").at("data")) {
    const std::string v = item.at("value").get<std::string>();
    if (v.size() > 2 && v.substr(v.size() - 2) == " %") expected[item.at("title").get<std::string>()] = std::stod(v);
  }
  ASSERT_EQ(m.devices.size(), 1u);
  const TbDeviceMetrics& d = m.devices[0];
  EXPECT_EQ(d.device, 0);
  ASSERT_TRUE(expected.count("GPU Utilization"));
  ASSERT_TRUE(expected.count("Est. SM Efficiency"));
  ASSERT_TRUE(expected.count("Est. Achieved Occupancy"));
  // The page rounds to 2 decimals: agree within that rounding.
  EXPECT_NEAR(d.utilization * 100, expected["GPU Utilization"], 0.005 + 1e-9);
  ASSERT_TRUE(d.sm_efficiency.has_value());
  EXPECT_NEAR(*d.sm_efficiency * 100, expected["Est. SM Efficiency"], 0.005 + 1e-9);
  ASSERT_TRUE(d.achieved_occupancy.has_value());
  EXPECT_NEAR(*d.achieved_occupancy, expected["Est. Achieved Occupancy"], 0.005 + 1e-9);
}

// Line 4 (Kernel view table) and line 5 (its pie): every kernel name, calls,
// total / mean / max / min µs, Tensor Cores, mean blocks per SM and occupancy.
TEST_F(GpuTbPluginResnet50, KernelTableMatchesThePlugin) {
  ASSERT_GE(oracle_->size(), 5u);
  const auto stats = tb_kernel_stats(*trace_);
  std::map<std::string, const TbKernelStat*> by_name;
  for (const auto& k : stats) by_name[k.name] = &k;
  const auto& rows = (*oracle_)[3].at("data").at("rows");
  ASSERT_EQ(stats.size(), rows.size());
  for (const auto& row : rows) {
    const std::string name = row[0].get<std::string>();
    ASSERT_TRUE(by_name.count(name)) << name;
    const TbKernelStat& k = *by_name[name];
    EXPECT_EQ(k.tensor_cores ? "Yes" : "No", row[1].get<std::string>()) << name;
    EXPECT_EQ(k.calls, row[2].get<int64_t>()) << name;
    EXPECT_NEAR(k.total_ns / 1e3, row[3].get<double>(), 0.5) << name;
    EXPECT_NEAR(k.mean_ns / 1e3, row[4].get<double>(), 0.5 + 1e-9) << name;  // round()ed
    EXPECT_NEAR(k.max_ns / 1e3, row[5].get<double>(), 0.5) << name;
    EXPECT_NEAR(k.min_ns / 1e3, row[6].get<double>(), 0.5) << name;
    EXPECT_NEAR(k.blocks_per_sm, row[7].get<double>(), 0.005 + 1e-9) << name;
    EXPECT_NEAR(k.occupancy, row[8].get<double>(), 0.005 + 1e-9) << name;
  }
  const auto& pie = (*oracle_)[4].at("total").at("rows");
  ASSERT_EQ(pie.size(), stats.size());
  for (const auto& row : pie) {
    const std::string name = row[0].get<std::string>();
    ASSERT_TRUE(by_name.count(name)) << name;
    EXPECT_NEAR(by_name[name]->total_ns / 1e3, row[1].get<double>(), 0.5) << name;
  }
}

// Line 1 "steps" again, exactly: the trace holds whole microseconds, which
// the plugin reads as they are. Rounding the model's times to whole µs
// gives the plugin's input back whatever the loader's rounding (< 0.5 µs),
// and then every value must be the plugin's, to the microsecond.
TEST_F(GpuTbPluginResnet50, ExactOnTheTracesWholeMicroseconds) {
  kineto::Trace t = *trace_;
  for (auto& e : t.events) {
    e.ts_ns = static_cast<int64_t>(std::llround(static_cast<double>(e.ts_ns) / 1e3)) * 1000;
    e.dur_ns = static_cast<int64_t>(std::llround(static_cast<double>(e.dur_ns) / 1e3)) * 1000;
  }
  const TbOverview o = tb_overview(t);
  const nlohmann::json& steps = (*oracle_)[0].at("steps");
  std::vector<std::string> cols;
  for (const auto& c : steps.at("columns"))
    if (c.contains("name")) cols.push_back(c.at("name").get<std::string>());
  const auto& rows = steps.at("rows");
  ASSERT_EQ(o.steps.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t c = 1, k = 1; c < cols.size(); ++c, k += 2) {
      for (int r = 0; r < kTbRoleCount; ++r)
        if (cols[c] == tb_role_name(static_cast<TbRole>(r))) {
          EXPECT_EQ(o.steps[i].ns[r], rows[i][k].get<int64_t>() * 1000) << "step " << o.steps[i].name << " " << cols[c];
        }
    }
  }
  // "performance" holds Python round() (half to even) of the means.
  const auto& perf = (*oracle_)[0].at("performance")[0];
  EXPECT_EQ(std::nearbyint(o.avg_total_ns / 1e3), perf.at("value").get<double>());
  for (const auto& child : perf.at("children")) {
    const std::string name = child.at("name").get<std::string>();
    for (int r = 0; r < kTbRoleCount; ++r)
      if (name == tb_role_name(static_cast<TbRole>(r))) {
        EXPECT_EQ(std::nearbyint(o.avg_ns[r] / 1e3), child.at("value").get<double>()) << name;
      }
  }
  const TbGpuMetrics m = tb_gpu_metrics(t);
  ASSERT_EQ(m.devices.size(), 1u);
  for (const auto& item : (*oracle_)[0].at("gpu_metrics").at("data")) {
    const std::string title = item.at("title").get<std::string>();
    const std::string v = item.at("value").get<std::string>();
    char buf[32];
    if (title == "GPU Utilization") {
      std::snprintf(buf, sizeof buf, "%.2f %%", m.devices[0].utilization * 100);
      EXPECT_EQ(std::stod(buf), std::stod(v)) << title;
    } else if (title == "Est. SM Efficiency") {
      std::snprintf(buf, sizeof buf, "%.2f %%", *m.devices[0].sm_efficiency * 100);
      EXPECT_EQ(std::stod(buf), std::stod(v)) << title;
    } else if (title == "Est. Achieved Occupancy") {
      std::snprintf(buf, sizeof buf, "%.2f %%", *m.devices[0].achieved_occupancy);
      EXPECT_EQ(std::stod(buf), std::stod(v)) << title;
    }
  }
}

// Line 3 (Operator view table, grouped by name) and line 2 (its pies):
// calls, device self / total, host self / total µs, Tensor Cores.
TEST_F(GpuTbPluginResnet50, OperatorTableMatchesThePlugin) {
  ASSERT_GE(oracle_->size(), 3u);
  const auto ops = tb_op_stats(*trace_);
  std::map<std::string, const TbOpStat*> by_name;
  for (const auto& s : ops) by_name[s.name] = &s;
  const auto& rows = (*oracle_)[2].at("data");
  EXPECT_EQ(ops.size(), rows.size());
  for (const auto& row : rows) {
    const std::string name = row.at("name").get<std::string>();
    ASSERT_TRUE(by_name.count(name)) << name;
    const TbOpStat& s = *by_name[name];
    EXPECT_EQ(s.calls, row.at("calls").get<int64_t>()) << name;
    const auto near = [&](int64_t ns, const char* key) {
      const double want = row.at(key).get<double>();
      EXPECT_NEAR(static_cast<double>(ns) / 1e3, want, std::max(1.0, 0.01 * want)) << name << " " << key;
    };
    near(s.device_self_ns, "device_self_duration");
    near(s.device_total_ns, "device_total_duration");
    near(s.host_self_ns, "host_self_duration");
    near(s.host_total_ns, "host_total_duration");
    EXPECT_EQ(s.tc_eligible ? "Yes" : "No", row.at("tc_eligible").get<std::string>()) << name;
    EXPECT_NEAR(s.tc_self_ratio * 100, row.at("tc_self_ratio").get<double>(), 0.005 + 1e-9) << name;
    EXPECT_NEAR(s.tc_total_ratio * 100, row.at("tc_total_ratio").get<double>(), 0.005 + 1e-9) << name;
  }
  // The pies list the ops with a positive value, per measure.
  const std::map<std::string, int64_t TbOpStat::*> pies = {{"device_total_time", &TbOpStat::device_total_ns},
                                                          {"device_self_time", &TbOpStat::device_self_ns},
                                                          {"host_total_time", &TbOpStat::host_total_ns},
                                                          {"host_self_time", &TbOpStat::host_self_ns}};
  for (const auto& [key, field] : pies) {
    const auto& pie_rows = (*oracle_)[1].at(key).at("rows");
    size_t positive = 0;
    for (const auto& s : ops) positive += s.*field > 0;
    EXPECT_EQ(positive, pie_rows.size()) << key;
    for (const auto& row : pie_rows) {
      const std::string name = row[0].get<std::string>();
      ASSERT_TRUE(by_name.count(name)) << key << " " << name;
      const double want = row[1].get<double>();
      EXPECT_NEAR(static_cast<double>(by_name[name]->*field) / 1e3, want, std::max(1.0, 0.01 * want)) << key << " " << name;
    }
  }
}

}  // namespace
}  // namespace torchneck::gpu
