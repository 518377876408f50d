// busy_machine, and the machine's load beside every verdict: the loop waits
// for a CPU and other processes took the cores (the machine's CPU time less
// the job's), or a hypervisor gave the CPUs to other guests. Inputs are
// hand-built: 2 cores, 1 torch thread, no workers, 40 steady steps of 100 ms.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

constexpr int64_t kMs = 1'000'000;

DiagnosisInput loop(double cpu_wait, double other_cores, double steal = 0) {
  DiagnosisInput in;
  in.env.cpu_cores = 2;
  in.env.torch_threads = 1;
  in.main_runqueue_fraction = cpu_wait;
  in.other_cores = other_cores;
  in.steal_share = steal;
  StepAnalysis& s = in.steps;
  s.step_ns = 100 * kMs;
  s.steady_count = 40;
  s.mean_error = 0.01;
  s.breakdown.ns[static_cast<int>(Phase::kForward)] = 50 * kMs;
  s.breakdown.ns[static_cast<int>(Phase::kBackward)] = 50 * kMs;
  return in;
}

const Finding* find(const std::vector<Finding>& fs, const std::string& id) {
  for (const Finding& f : fs)
    if (f.id == id) return &f;
  return nullptr;
}

TEST(BusyMachine, OtherProcessesTakingTheCoresAreNamedNotTheScript) {
  // GIVEN a loop that waited for a CPU 30 % of the run while other processes used 1.6 of 2 cores
  const std::vector<Finding> fs = run_detectors(loop(0.30, 1.6), Evidence::kCpu);
  // THEN busy_machine, with both measurements; not core_contention (1 thread, no workers: not the script's crowd)
  const Finding* f = find(fs, "busy_machine");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kMedium);
  EXPECT_FALSE(f->estimated_gain_pct.has_value());
  EXPECT_NE(f->title.find("30.0 %"), std::string::npos) << f->title;
  bool others = false;
  for (const std::string& e : f->evidence) others = others || e.find("other processes used 1.6 of the 2 cores") == 0;
  EXPECT_TRUE(others);
  EXPECT_EQ(find(fs, "core_contention"), nullptr);
}

TEST(BusyMachine, StealCountsAsOtherWork) {
  EXPECT_NE(find(run_detectors(loop(0.20, 0.1, 0.15), Evidence::kCpu), "busy_machine"), nullptr);
}

TEST(BusyMachine, NotWhenTheLoopDidNotWaitOrNoOneElseWorked) {
  // the machine busy but the loop not waiting; the loop waiting with no one else on the machine
  EXPECT_EQ(find(run_detectors(loop(0.05, 1.8), Evidence::kCpu), "busy_machine"), nullptr);
  EXPECT_EQ(find(run_detectors(loop(0.30, 0.2), Evidence::kCpu), "busy_machine"), nullptr);
  // and nothing is said of a load that was not measured (a Kineto trace)
  EXPECT_EQ(find(run_detectors(loop(-1, -1, -1), Evidence::kCpu), "busy_machine"), nullptr);
}

TEST(BusyMachine, ABusyMachineLowersEveryFindingsConfidenceAndTheVerdictSaysSo) {
  // GIVEN the same loop with an optimizer of 30 % (optimizer_heavy), once quiet, once busy
  for (const double wait : {0.01, 0.30}) {
    DiagnosisInput in = loop(wait, wait > 0.1 ? 1.6 : 0.0);
    in.steps.breakdown.ns[static_cast<int>(Phase::kForward)] = 35 * kMs;
    in.steps.breakdown.ns[static_cast<int>(Phase::kBackward)] = 35 * kMs;
    in.steps.breakdown.ns[static_cast<int>(Phase::kOptimizer)] = 30 * kMs;
    const Diagnosis d = diagnose(in);
    const Finding* f = find(d.findings, "optimizer_heavy");
    ASSERT_NE(f, nullptr) << wait;
    // THEN quiet: high confidence, a plain verdict; busy: medium, saying why, and the verdict says so
    const bool busy = wait > 0.1;
    EXPECT_EQ(d.load.busy(), busy);
    EXPECT_EQ(f->confidence, busy ? "medium" : "high") << f->confidence_basis;
    EXPECT_EQ(f->confidence_basis.find("one level lower") != std::string::npos, busy) << f->confidence_basis;
    EXPECT_EQ(d.verdict.find("Measured on a busy machine") != std::string::npos, busy) << d.verdict;
  }
}

}  // namespace
}  // namespace torchneck
