// The one rule for a finding that both the CPU and the GPU side have
// (diagnosis.h, combine_findings): the GPU side's replaces the CPU side's,
// other findings of both sides stay, and the diagnosis of a live run with
// GPU evidence (diagnose() on an input with `gpu` set) equals what
// `torchneck analyze` gets by combining afterwards (add_gpu_reports).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyze/analysis.h"

namespace torchneck {
namespace {

constexpr int64_t kMs = 1'000'000;

// GIVEN a CPU side waiting for data 30 % of the step (input_bound, CPU) with
// the optimizer at 25 % (optimizer_heavy)...
DiagnosisInput cpu_side() {
  DiagnosisInput in;
  in.env.cpu_cores = 4;
  in.env.torch_threads = 4;
  in.steps.steps.resize(10);
  in.steps.step_ns = 100 * kMs;
  in.steps.breakdown.ns[static_cast<int>(Phase::kData)] = 30 * kMs;
  in.steps.breakdown.ns[static_cast<int>(Phase::kOptimizer)] = 25 * kMs;
  in.steps.breakdown.ns[static_cast<int>(Phase::kForward)] = 25 * kMs;
  in.steps.breakdown.ns[static_cast<int>(Phase::kBackward)] = 20 * kMs;
  return in;
}

// ...and a GPU side whose DataLoader share is 10 % (input_bound, GPU) on a
// GPU busy 50 % of the steps (gpu_idle).
gpu::GpuReport gpu_side() {
  gpu::GpuReport r;
  r.tb.avg_total_ns = 100e6;
  r.tb.avg_ns[static_cast<int>(gpu::TbRole::kDataLoader)] = 10e6;
  gpu::TbDeviceMetrics d;
  d.utilization = 0.5;
  r.metrics.devices.push_back(d);
  return r;
}

std::vector<std::string> ids(const Diagnosis& d) {
  std::vector<std::string> out;
  for (const Finding& f : d.findings) out.push_back(f.id);
  return out;
}

TEST(CombineFindings, TheGpuSidesFindingReplacesTheCpuSidesOfTheSameId) {
  const gpu::GpuReport gpu = gpu_side();
  DiagnosisInput in = cpu_side();
  // WHEN the CPU side alone is diagnosed, input_bound is the CPU's
  const Diagnosis cpu_only = diagnose(in);
  ASSERT_EQ(ids(cpu_only), (std::vector<std::string>{"input_bound", "optimizer_heavy"}));
  EXPECT_NE(cpu_only.findings[0].title.find("training loop waits for data 30.0 %"), std::string::npos);
  // WHEN both sides are
  in.gpu = &gpu;
  const Diagnosis both = diagnose(in);
  // THEN one input_bound, the GPU's (10 %: the gain it promises), and the
  // findings only one side has, ordered by gain
  int input_bound = 0;
  for (const Finding& f : both.findings) {
    if (f.id != "input_bound") continue;
    ++input_bound;
    EXPECT_NE(f.title.find("the GPU waits for data 10.0 %"), std::string::npos) << f.title;
    ASSERT_TRUE(f.estimated_gain_pct.has_value());
    EXPECT_DOUBLE_EQ(*f.estimated_gain_pct, 10.0);
  }
  EXPECT_EQ(input_bound, 1);
  // optimizer 25 % x 50 % = 12.5 % of gain ranks before the GPU's 10 %.
  EXPECT_EQ(ids(both), (std::vector<std::string>{"optimizer_heavy", "input_bound", "gpu_idle"}));
}

TEST(CombineFindings, ALiveRunWithGpuEvidenceAndAnalyzesLateCombineAlike) {
  DiagnosisInput in = cpu_side();
  const StepAnalysis steps = in.steps;
  // `torchneck analyze`: CPU side first, the GPU report's own findings later.
  Analysis late;
  late.steps = steps;
  late.diagnosis = diagnose(in);
  gpu::GpuReport report = gpu_side();
  DiagnosisInput gpu_only;
  gpu_only.gpu = &report;
  report.findings = run_detectors(gpu_only, Evidence::kGpu);  // as gpu_report() fills them
  std::vector<gpu::GpuReport> reports = {report};
  add_gpu_reports(late, std::move(reports));
  // A live run with the GPU report at hand.
  const gpu::GpuReport gpu = gpu_side();
  in.gpu = &gpu;
  const Diagnosis live = diagnose(in);
  ASSERT_EQ(ids(late.diagnosis), ids(live));
  for (size_t i = 0; i < live.findings.size(); ++i) {
    EXPECT_EQ(late.diagnosis.findings[i].title, live.findings[i].title);
    EXPECT_EQ(late.diagnosis.findings[i].severity, live.findings[i].severity);
  }
  EXPECT_EQ(late.diagnosis.verdict, live.verdict);
  EXPECT_EQ(late.gpu.size(), 1u);
}

TEST(CombineFindings, NoGpuFindingsLeaveTheCpuSideAsItWas) {
  const Diagnosis cpu_only = diagnose(cpu_side());
  Diagnosis d = cpu_only;
  combine_findings(d, {}, cpu_side().steps);
  EXPECT_EQ(ids(d), ids(cpu_only));
  EXPECT_EQ(d.verdict, cpu_only.verdict);
}

}  // namespace
}  // namespace torchneck
