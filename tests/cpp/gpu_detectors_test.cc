// GPU findings of `torchneck analyze`: each detector fires exactly on the
// facts its definition names, and not otherwise. Inputs are hand-built
// GpuReports whose numbers are chosen on both sides of each threshold, run
// through the registry's GPU detectors as gpu_report() runs them.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "analyze/diagnosis.h"
#include "analyze/gpu/gpu_report.h"
#include "ingest/kineto_json.h"
#include "trace_runs.h"

namespace torchneck::gpu {
namespace {

GpuReport quiet() {
  GpuReport r;
  r.tb.avg_total_ns = 100e6;  // 100 ms steps, all kernel
  r.tb.avg_ns[static_cast<int>(TbRole::kKernel)] = 100e6;
  TbDeviceMetrics d;
  d.utilization = 0.95;
  r.metrics.devices.push_back(d);
  r.facts.device_name = "NVIDIA A100-SXM4-40GB";
  r.facts.device_memory = int64_t{40} << 30;
  r.facts.compute_major = 8;
  r.facts.kernels = 1000;
  r.facts.kernel_ns = 95'000'000;
  r.facts.any_tensor_cores = true;
  r.facts.span_ns = 1'000'000'000;
  r.facts.median_launch_delay_ns = 2'000'000;
  return r;
}

std::vector<Finding> gpu_findings(const GpuReport& r) {
  DiagnosisInput in;
  in.gpu = &r;
  return run_detectors(in, Evidence::kGpu);
}

std::set<std::string> ids(const GpuReport& r) {
  const std::vector<Finding> out = gpu_findings(r);
  std::set<std::string> s;
  for (const auto& f : out) {
    EXPECT_FALSE(f.title.empty());
    EXPECT_FALSE(f.evidence.empty());
    EXPECT_FALSE(f.recommendation.empty());
    s.insert(f.id);
  }
  return s;
}

TEST(GpuDetectors, ABusyWellFedGpuHasNoFinding) { EXPECT_TRUE(ids(quiet()).empty()); }

TEST(GpuDetectors, InputBoundFromTheDataLoaderShareAtThePluginsFivePercent) {
  GpuReport r = quiet();
  r.tb.avg_ns[static_cast<int>(TbRole::kDataLoader)] = 4.9e6;
  EXPECT_EQ(ids(r).count("input_bound"), 0u);
  r.tb.avg_ns[static_cast<int>(TbRole::kDataLoader)] = 5.1e6;
  EXPECT_EQ(ids(r).count("input_bound"), 1u);
  r.tb.avg_ns[static_cast<int>(TbRole::kDataLoader)] = 30e6;
  const std::vector<Finding> out = gpu_findings(r);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].severity, Severity::kHigh);
  ASSERT_TRUE(out[0].estimated_gain_pct.has_value());
  EXPECT_DOUBLE_EQ(*out[0].estimated_gain_pct, 30.0);
}

TEST(GpuDetectors, GpuIdleBelowSixtyPercentUtilization) {
  GpuReport r = quiet();
  r.metrics.devices[0].utilization = 0.61;
  EXPECT_EQ(ids(r).count("gpu_idle"), 0u);
  r.metrics.devices[0].utilization = 0.59;
  EXPECT_EQ(ids(r).count("gpu_idle"), 1u);
}

TEST(GpuDetectors, LaunchBoundNeedsShortKernelsAnIdleGpuAndNoQueue) {
  GpuReport r = quiet();
  r.metrics.devices[0].utilization = 0.4;
  r.facts.short_kernels = 600;
  r.facts.median_launch_delay_ns = 20'000;
  EXPECT_EQ(ids(r).count("launch_bound"), 1u);
  r.facts.median_launch_delay_ns = 5'000'000;  // work was queued: not launch-bound
  EXPECT_EQ(ids(r).count("launch_bound"), 0u);
  r.facts.median_launch_delay_ns = 20'000;
  r.facts.short_kernels = 400;
  EXPECT_EQ(ids(r).count("launch_bound"), 0u);
}

TEST(GpuDetectors, HostSyncFromBlockedTimeShare) {
  GpuReport r = quiet();
  SyncPoint s;
  s.what = "cudaStreamSynchronize";
  s.context = "aten::item > aten::_local_scalar_dense";
  s.calls = 100;
  s.total_ns = 40'000'000;
  r.facts.syncs.push_back(s);
  r.facts.sync_ns = 40'000'000;  // 4 % of 1 s
  EXPECT_EQ(ids(r).count("host_sync"), 0u);
  r.facts.sync_ns = r.facts.syncs[0].total_ns = 60'000'000;
  EXPECT_EQ(ids(r).count("host_sync"), 1u);
  // High from a fifth of the trace blocked.
  r.facts.sync_ns = r.facts.syncs[0].total_ns = 190'000'000;
  ASSERT_EQ(gpu_findings(r).size(), 1u);
  EXPECT_EQ(gpu_findings(r)[0].severity, Severity::kMedium);
  r.facts.sync_ns = r.facts.syncs[0].total_ns = 210'000'000;
  ASSERT_EQ(gpu_findings(r).size(), 1u);
  EXPECT_EQ(gpu_findings(r)[0].severity, Severity::kHigh);
  EXPECT_NE(gpu_findings(r)[0].title.find("21.0 % of the trace"), std::string::npos) << gpu_findings(r)[0].title;
  // A live run's window says where in the script the calls came from.
  r.sync_sites.push_back(SyncSite{"train.py:30(train)", 100, 200'000'000});
  const auto f = gpu_findings(r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].evidence.back(), "in the script: train.py:30(train), 100 synchronising calls, 200 ms") << f[0].evidence.back();
}

TEST(GpuDetectors, NoMixedPrecisionOnlyOnNvidiaWithTensorCoresUnused) {
  GpuReport r = quiet();
  r.facts.any_tensor_cores = false;
  EXPECT_EQ(ids(r).count("no_mixed_precision"), 1u);
  r.facts.compute_major = 6;  // Pascal: no tensor cores
  EXPECT_EQ(ids(r).count("no_mixed_precision"), 0u);
  r.facts.compute_major = 9;
  r.facts.device_name = "AMD Instinct MI250X";
  EXPECT_EQ(ids(r).count("no_mixed_precision"), 0u);
}

TEST(GpuDetectors, CommunicationBoundFromHtaKernelTypesOrThePluginsCategory) {
  GpuReport r = quiet();
  r.hta.kernel_types.push_back({"COMMUNICATION", 100, 25.0});
  EXPECT_EQ(ids(r).count("communication_bound"), 1u);
  r.hta.kernel_types[0].percentage = 15.0;
  EXPECT_EQ(ids(r).count("communication_bound"), 0u);
  r.tb.avg_ns[static_cast<int>(TbRole::kCommunication)] = 21e6;
  EXPECT_EQ(ids(r).count("communication_bound"), 1u);
}

TEST(GpuDetectors, MemoryPressureAtNinetyPercentOfTheDevice) {
  GpuReport r = quiet();
  r.facts.peak_allocated = static_cast<int64_t>(0.89 * static_cast<double>(r.facts.device_memory));
  EXPECT_EQ(ids(r).count("memory_pressure"), 0u);
  r.facts.peak_reserved = static_cast<int64_t>(0.91 * static_cast<double>(r.facts.device_memory));
  EXPECT_EQ(ids(r).count("memory_pressure"), 1u);
}

TEST(GpuDetectors, PageableCopiesAboveOnePercent) {
  GpuReport r = quiet();
  r.facts.pageable_copies = 3;
  r.facts.pageable_ns = 5'000'000;
  EXPECT_EQ(ids(r).count("pageable_memcpy"), 0u);
  r.facts.pageable_ns = 20'000'000;
  EXPECT_EQ(ids(r).count("pageable_memcpy"), 1u);
  // A live run's DataLoaders: the one that does not pin is named, the one
  // that does is not.
  DiagnosisInput in;
  in.gpu = &r;
  DataLoaderFacts unpinned, pinned;
  unpinned.created_at = "train.py:40";
  pinned.created_at = "train.py:41";
  pinned.pin_memory = true;
  in.env.dataloaders = {unpinned, pinned};
  const std::vector<Finding> f = run_detectors(in, Evidence::kGpu);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].evidence.back(), "DataLoader without pin_memory: train.py:40");
  EXPECT_NE(f[0].recommendation.find("non_blocking=True) at train.py:40"), std::string::npos) << f[0].recommendation;
}

TEST(GpuFactsFromTrace, MemoryPeakSyncContextAndPageableCopies) {
  // GIVEN a small trace written by hand: a sync from aten::item, a pageable
  // copy, memory events with totals (newer traces) on device 0.
  const std::string text = R"JSON({"deviceProperties": [{"id": 0, "name": "NVIDIA A100", "totalGlobalMem": 1000,
      "computeMajor": 8}],
    "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
    {"ph": "X", "cat": "cpu_op", "name": "aten::_local_scalar_dense", "pid": 1, "tid": 1, "ts": 101, "dur": 48},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 102, "dur": 5, "args": {"correlation": 7}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1, "ts": 108, "dur": 40, "args": {"correlation": 8}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7, "ts": 110, "dur": 30,
     "args": {"stream": 7, "correlation": 7, "bytes": 4}},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 100, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 10, "Total Allocated": 700, "Total Reserved": 950}},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 120, "args": {"Device Type": 1, "Device Id": 0, "Bytes": -10, "Total Allocated": 690, "Total Reserved": 950}}
  ]})JSON";
  const GpuFacts g = gpu_facts(kineto::parse_trace(text, "hand.json"));
  // THEN
  EXPECT_EQ(g.peak_allocated, 700);
  EXPECT_EQ(g.peak_reserved, 950);
  EXPECT_FALSE(g.peak_is_lower_bound);
  EXPECT_EQ(g.pageable_copies, 1u);
  EXPECT_EQ(g.pageable_ns, 30'000);
  ASSERT_FALSE(g.syncs.empty());
  bool stream_sync = false, dtoh = false;
  for (const auto& s : g.syncs) {
    EXPECT_EQ(s.context, "aten::item > aten::_local_scalar_dense");
    stream_sync = stream_sync || (s.what == "cudaStreamSynchronize" && s.total_ns == 40'000);
    dtoh = dtoh || s.what == "Memcpy DtoH (Device -> Pageable)";
  }
  EXPECT_TRUE(stream_sync);
  EXPECT_TRUE(dtoh);
  ASSERT_EQ(g.gpu_time_by_op.size(), 1u);
  EXPECT_EQ(g.gpu_time_by_op[0].op, "aten::item");
}

}  // namespace
}  // namespace torchneck::gpu

namespace torchneck::gpu {
namespace {

TEST(GpuFactsFromTrace, LayerGpuTimeForwardFromModuleScopesBackwardThroughFwdBwdFlows) {
  // GIVEN two modules; fc's forward op (aten::addmm) is linked by a fwdbwd
  // flow to its backward node on the autograd thread, which launches a
  // 70 us kernel; the forward kernels take 20 us (conv) and 30 us (fc).
  const std::string text = R"JSON({"traceEvents": [
    {"ph": "X", "cat": "python_function", "name": "nn.Module: Net_0", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "python_function", "name": "nn.Module: Conv2d_0", "pid": 1, "tid": 1, "ts": 10, "dur": 30},
    {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": 11, "dur": 20},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 5, "args": {"correlation": 1}},
    {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 1, "tid": 1, "ts": 50, "dur": 40},
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 51, "dur": 30},
    {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 9, "pid": 1, "tid": 1, "ts": 51},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 52, "dur": 5, "args": {"correlation": 2}},
    {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: AddmmBackward0", "pid": 1, "tid": 2, "ts": 200, "dur": 50},
    {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 9, "pid": 1, "tid": 2, "ts": 200, "bp": "e"},
    {"ph": "X", "cat": "cpu_op", "name": "AddmmBackward0", "pid": 1, "tid": 2, "ts": 201, "dur": 40},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 202, "dur": 5, "args": {"correlation": 3}},
    {"ph": "X", "cat": "kernel", "name": "conv_kernel", "pid": 0, "tid": 7, "ts": 20, "dur": 20, "args": {"stream": 7, "correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 60, "dur": 30, "args": {"stream": 7, "correlation": 2}},
    {"ph": "X", "cat": "kernel", "name": "gemm_bwd_kernel", "pid": 0, "tid": 7, "ts": 210, "dur": 70, "args": {"stream": 7, "correlation": 3}}
  ]})JSON";
  const GpuFacts g = gpu_facts(kineto::parse_trace(text, "layers.json"));
  // THEN forward time goes to the innermost module, backward to the module
  // of the forward op the flow links to
  ASSERT_EQ(g.gpu_time_by_layer.size(), 2u);
  EXPECT_EQ(g.gpu_time_by_layer[0].module, "Linear_0");
  EXPECT_EQ(g.gpu_time_by_layer[0].forward_ns, 30'000);
  EXPECT_EQ(g.gpu_time_by_layer[0].backward_ns, 70'000);
  EXPECT_EQ(g.gpu_time_by_layer[1].module, "Conv2d_0");
  EXPECT_EQ(g.gpu_time_by_layer[1].forward_ns, 20'000);
  EXPECT_EQ(g.gpu_time_by_layer[1].backward_ns, 0);
}

}  // namespace
}  // namespace torchneck::gpu
