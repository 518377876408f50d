// A live run's GPU window against hand-built truth: device work launched
// under known modules (forward, and backward through the nodes the modules'
// ops created) lands in those layers' GPU times; Kineto's clock is moved
// onto the run's by the operators both recorded; the window's steps leave
// the CPU-side statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "analyze/gpu/gpu_window.h"
#include "analyze/layers.h"
#include "analyze/steps.h"
#include "ingest/kineto_json.h"
#include "run_builder.h"

namespace torchneck {
namespace {

using test_support::RunBuilder;

constexpr int64_t kUs = 1000;
// Kineto's clock is the run's less this (before the window is moved).
constexpr int64_t kKinetoBehind = 5'000'000'000;
// ... and Kineto's operators start this much later than ours do.
constexpr int64_t kJitter = 300;

uint32_t add_name(Activities& a, const std::string& n) {
  a.names.push_back(n);
  return static_cast<uint32_t>(a.names.size() - 1);
}

void add(Activities& a, ActivityKind cat, const std::string& name, int64_t live_ts, int64_t dur, int64_t tid,
         int64_t correlation) {
  Activity e;
  e.cat = cat;
  e.name = add_name(a, name);
  e.ts_ns = live_ts - kKinetoBehind;
  e.dur_ns = dur;
  e.tid = tid;
  e.pid = 1;
  e.correlation = correlation;
  a.events.push_back(e);
}

// Model(fc1, fc2) on thread 0 (Linux tid 100), backward on thread 1 (101):
//   fc1 forward  1..4 us, aten::addmm (seq 7) 1.5..3.5, launches at 2 us a 3 us kernel
//   fc2 forward  5..8 us, aten::addmm (seq 8) 5.5..7.5, launches at 6 us a 7 us kernel
//   AddmmBackward0 (seq 8) 10..12 us, launches at 11 us a 2.5 us kernel
//   AddmmBackward0 (seq 7) 12..14 us, launches at 13 us a 1.5 us kernel and a 0.5 us memcpy
//   the optimizer 15..16 us (no module), launches at 15.5 us a 0.4 us kernel
struct Window {
  Run run;
  Activities activities;
};

Window window() {
  RunBuilder rb;
  rb.run.threads = {ThreadInfo{100, "MainThread"}, ThreadInfo{101, "autograd"}};
  rb.run.modules = {ModuleInfo{"Model", "Model", 20, -1}, ModuleInfo{"fc1", "Linear", 10, 0},
                    ModuleInfo{"fc2", "Linear", 10, 0}};
  rb.module(0, 1 * kUs, 9 * kUs);
  rb.module(1, 1 * kUs, 4 * kUs);
  rb.module(2, 5 * kUs, 8 * kUs);
  rb.event("aten::addmm", OpKind::kOperator, 1500, 3500, 7, 0, 1);
  rb.event("aten::addmm", OpKind::kOperator, 5500, 7500, 8, 0, 1);
  rb.event("AddmmBackward0", OpKind::kBackward, 10 * kUs, 12 * kUs, 8, 1, 1);
  rb.event("AddmmBackward0", OpKind::kBackward, 12 * kUs, 14 * kUs, 7, 1, 1);
  rb.event("aten::add_", OpKind::kOperator, 15 * kUs, 16 * kUs, -1, 0, 1);
  rb.finish();
  Window w;
  w.run = std::move(rb.run);
  Activities& a = w.activities;
  add(a, ActivityKind::kCpuOp, "aten::addmm", 1500 + kJitter, 2000, 100, -1);
  add(a, ActivityKind::kCpuOp, "aten::addmm", 5500 + kJitter, 2000, 100, -1);
  add(a, ActivityKind::kCpuOp, "AddmmBackward0", 10 * kUs + kJitter, 2000, 101, -1);  // a node: not an operator of ours
  add(a, ActivityKind::kRuntime, "cudaLaunchKernel", 2 * kUs, 5 * kUs / 10, 100, 1);
  add(a, ActivityKind::kKernel, "gemm_fc1", 4 * kUs, 3 * kUs, 7, 1);
  add(a, ActivityKind::kRuntime, "cudaLaunchKernel", 6 * kUs, 500, 100, 2);
  add(a, ActivityKind::kKernel, "gemm_fc2", 8 * kUs, 7 * kUs, 7, 2);
  add(a, ActivityKind::kRuntime, "cudaLaunchKernel", 11 * kUs, 500, 101, 3);
  add(a, ActivityKind::kKernel, "gemm_fc2_bwd", 16 * kUs, 2500, 7, 3);
  add(a, ActivityKind::kRuntime, "cudaLaunchKernel", 13 * kUs, 500, 101, 4);
  add(a, ActivityKind::kKernel, "gemm_fc1_bwd", 19 * kUs, 1500, 7, 4);
  add(a, ActivityKind::kMemcpy, "Memcpy DtoD", 21 * kUs, 500, 7, 4);
  add(a, ActivityKind::kRuntime, "cudaLaunchKernel", 15500, 300, 100, 5);
  add(a, ActivityKind::kKernel, "sgd", 22 * kUs, 400, 7, 5);
  add(a, ActivityKind::kRuntime, "cudaLaunchKernel", 15500, 300, 999, 6);  // a thread the run does not know
  add(a, ActivityKind::kKernel, "other", 23 * kUs, 900, 7, 6);
  return w;
}

const LayerStats& layer(const LayerAnalysis& l, const std::string& name) {
  for (const LayerStats& s : l.layers)
    if (s.name == name) return s;
  throw std::runtime_error("no layer " + name);
}

TEST(GpuWindow, TheClocksAreAlignedOnTheOperatorsBothRecorded) {
  Window w = window();
  // GIVEN the window moved by the clocks' offset alone
  gpu::shift_activities(w.activities, kKinetoBehind);
  // WHEN aligned on the operators
  const gpu::Alignment al = gpu::align_window(w.run, w.activities);
  // THEN the two aten::addmm match (the backward node is not an operator of
  // the run's), Kineto's 300 ns late start is corrected, nothing is left
  EXPECT_EQ(al.matched, 2u);
  EXPECT_EQ(al.correction_ns, -kJitter);
  EXPECT_EQ(al.residual_ns, 0);
}

// A window whose Kineto clock runs 1.5 % slow (torch's TSC conversion fit
// off, as seen on these VMs in bursts): 4 steps of 25 ms, each 200
// aten::addmm 100 us apart and one aten::zero_, Kineto's times at 1/1.015
// of ours past the window's start, and 300 ns late. The stretch reaches
// 1.5 ms by the end, 15 addmm spacings: nearest matching under an offset
// alone pairs most operators with a neighbour.
TEST(GpuWindow, AStretchedKinetoClockIsAlignedByALine) {
  constexpr int64_t kStart = 1'000'000'000, kStep = 25'000'000, kSpacing = 100 * kUs;
  constexpr double kStretch = 0.015;
  RunBuilder rb;
  rb.run.threads = {ThreadInfo{100, "MainThread"}};
  Activities a;
  auto kineto = [&](int64_t live) {  // Kineto's time of a live instant, before the clocks' offset
    return kStart + static_cast<int64_t>(std::llround(static_cast<double>(live - kStart) / (1 + kStretch))) + kJitter -
           kKinetoBehind;
  };
  for (int step = 0; step < 4; ++step) {
    const int64_t s0 = kStart + step * kStep;
    rb.event("aten::zero_", OpKind::kOperator, s0, s0 + 20 * kUs, -1, 0, 1);
    add(a, ActivityKind::kCpuOp, "aten::zero_", 0, 20 * kUs, 100, -1);
    a.events.back().ts_ns = kineto(s0);
    for (int k = 0; k < 200; ++k) {
      const int64_t t = s0 + 50 * kUs + k * kSpacing;
      rb.event("aten::addmm", OpKind::kOperator, t, t + 60 * kUs, -1, 0, 1);
      add(a, ActivityKind::kCpuOp, "aten::addmm", 0, 60 * kUs, 100, -1);
      a.events.back().ts_ns = kineto(t);
      a.events.back().dur_ns = kineto(t + 60 * kUs) - kineto(t);  // on Kineto's clock, as its start
    }
  }
  rb.finish();
  gpu::shift_activities(a, kKinetoBehind);
  // WHEN aligned
  const gpu::Alignment al = gpu::align_window(rb.run, a);
  // THEN every operator is matched, the stretch found, and nothing is left
  // but rounding
  EXPECT_EQ(al.matched, 804u);
  EXPECT_NEAR(al.stretch, kStretch, 1e-5);
  EXPECT_LE(al.residual_ns, 5);
  // AND once moved, the last addmm starts and lasts as ours did
  gpu::align_activities(a, al);
  const Activity& last = a.events.back();
  const int64_t live_last = kStart + 3 * kStep + 50 * kUs + 199 * kSpacing;
  EXPECT_NEAR(static_cast<double>(last.ts_ns), static_cast<double>(live_last), 5.0);
  EXPECT_NEAR(static_cast<double>(last.dur_ns), 60.0 * kUs, 5.0);
}

TEST(GpuWindow, AnOffsetAloneStaysAnOffset) {
  Window w = window();
  gpu::shift_activities(w.activities, kKinetoBehind);
  const gpu::Alignment al = gpu::align_window(w.run, w.activities);
  EXPECT_EQ(al.stretch, 0.0);
  // moved by the offset alone: the first addmm lands on ours, 1.5 us
  gpu::align_activities(w.activities, al);
  EXPECT_EQ(w.activities.events.front().ts_ns, 1500);
}

TEST(GpuWindow, DeviceWorkGoesToTheLayerThatLaunchedItForwardAndBackward) {
  Window w = window();
  gpu::shift_activities(w.activities, kKinetoBehind);
  // WHEN the launches are made and given to the layer analysis
  const std::vector<GpuLaunch> launches = gpu::gpu_launches(w.run, w.activities);
  // THEN one per runtime call of a known thread, with its device work's time
  ASSERT_EQ(launches.size(), 5u);
  const LayerAnalysis l = analyze_layers(w.run, {}, &launches);
  ASSERT_TRUE(l.gpu);
  // AND fc1: 3 us forward, 1.5 + 0.5 us backward (its node's kernel and copy)
  EXPECT_EQ(layer(l, "fc1").gpu_forward_ns, 3 * kUs);
  EXPECT_EQ(layer(l, "fc1").gpu_backward_ns, 2 * kUs);
  EXPECT_EQ(layer(l, "fc1").gpu_launches, 2u);
  // AND fc2: 7 us forward, 2.5 us backward
  EXPECT_EQ(layer(l, "fc2").gpu_forward_ns, 7 * kUs);
  EXPECT_EQ(layer(l, "fc2").gpu_backward_ns, 2500);
  // AND the model holds its children's, inclusive
  EXPECT_EQ(layer(l, "Model").gpu_forward_ns, 10 * kUs);
  EXPECT_EQ(layer(l, "Model").gpu_backward_ns, 4500);
  // AND the optimizer's kernel found no layer
  EXPECT_EQ(l.gpu_attributed_ns, 14500);
  EXPECT_EQ(l.gpu_unattributed_ns, 400);
}

TEST(GpuWindow, LaunchesInAnEvaluationPassAreNoLayersTrainingCost) {
  Window w = window();
  gpu::shift_activities(w.activities, kKinetoBehind);
  const std::vector<GpuLaunch> launches = gpu::gpu_launches(w.run, w.activities);
  // GIVEN fc2's forward inside an evaluation pass
  const LayerAnalysis l = analyze_layers(w.run, {{5 * kUs, 8 * kUs}}, &launches);
  EXPECT_EQ(layer(l, "fc2").gpu_forward_ns, 0);
  EXPECT_EQ(layer(l, "fc1").gpu_forward_ns, 3 * kUs);
  EXPECT_EQ(l.gpu_unattributed_ns, 400 + 7 * kUs);
}

TEST(GpuWindow, WithoutAWindowLayersHaveNoGpuTimes) {
  const Window w = window();
  const LayerAnalysis l = analyze_layers(w.run);
  EXPECT_FALSE(l.gpu);
  EXPECT_EQ(layer(l, "fc1").gpu_forward_ns, -1);
}

TEST(GpuWindow, TheWindowsStepsLeaveTheCpuStatistics) {
  // GIVEN 12 optimizer steps of 10 ms, and a window over steps 5..8 (1-based)
  // opened a few microseconds before step 4's end (inside its optimizer.step)
  constexpr int64_t kMs = 1'000'000;
  RunBuilder rb;
  rb.run.threads = {ThreadInfo{100, "MainThread"}};
  rb.run.env.optimizers = {OptimizerFacts{"SGD", 2, false}};
  for (int i = 0; i < 12; ++i) {
    const int64_t t = i * 10 * kMs;
    rb.event("aten::mm", OpKind::kOperator, t, t + 8 * kMs);
    rb.event("Optimizer.step#SGD.step", OpKind::kUserScope, t + 8 * kMs, t + 10 * kMs);
  }
  rb.finish();
  rb.run.gpu_window.mode = "on";
  rb.run.gpu_window.state = GpuWindowState::kRecorded;
  rb.run.gpu_window.start_ns = 40 * kMs - 5000;
  rb.run.gpu_window.end_ns = 80 * kMs - 2000;
  const StepAnalysis s = analyze_steps(rb.run);
  ASSERT_EQ(s.steps.size(), 12u);
  // THEN exactly steps 5..8 (indices 4..7) are the window's, not steady
  for (size_t i = 0; i < s.steps.size(); ++i) EXPECT_EQ(s.steps[i].gpu_window, i >= 4 && i <= 7) << i;
  EXPECT_EQ(s.gpu_window_steps, 4u);
  EXPECT_EQ(s.steady_count, 12u - 1 - 4);
  // AND so when the thread waited 3 ms for a CPU between opening the window
  // and step 4's end (a busy machine): 30 % of step 4 lies in the window
  rb.run.gpu_window.start_ns = 37 * kMs;
  const StepAnalysis held = analyze_steps(rb.run);
  for (size_t i = 0; i < held.steps.size(); ++i) EXPECT_EQ(held.steps[i].gpu_window, i >= 4 && i <= 7) << i;
  // AND a window that was not recorded leaves every step
  rb.run.gpu_window.state = GpuWindowState::kFailed;
  EXPECT_EQ(analyze_steps(rb.run).gpu_window_steps, 0u);
}

TEST(GpuWindow, SynchronisingCallsAreNamedByTheScriptFunctionThatMadeThem) {
  // GIVEN the sampler's stacks on the main thread: train() -> loss.item()
  // inside torch until 40 us, then log_metrics() -> torch until 100 us
  Window w = window();
  auto fn = [&](const std::string& f, const std::string& file, int line) {
    PyFunctionStats p;
    p.function = f;
    p.file = file;
    p.line = line;
    w.run.python.push_back(p);
    return static_cast<uint32_t>(w.run.python.size() - 1);
  };
  const uint32_t mod = fn("<module>", "/home/u/train.py", 1), train = fn("train", "/home/u/train.py", 30),
                 item = fn("item", "/usr/lib/python3/dist-packages/torch/_tensor.py", 900),
                 log = fn("log_metrics", "/home/u/metrics.py", 12),
                 len_ = fn("<built-in method len>", "~", 0);
  w.run.python[len_].builtin = true;
  w.run.stacks.push_back(SampledStack{0, {mod, train, item}, 1, 0});
  w.run.stacks.push_back(SampledStack{0, {mod, train, log, len_}, 1, 0});
  for (int64_t t = 0; t < 100 * kUs; t += 5 * kUs)
    w.run.samples.push_back(PySample{t, 0, t < 40 * kUs ? 0u : 1u, 5 * kUs});
  // AND three synchronising calls on the main thread (two inside the first
  // stack's time, one in the second's), one on the autograd thread (no
  // samples there), one far beyond any sample, and a launch (not a sync)
  Activities& a = w.activities;
  add(a, ActivityKind::kRuntime, "cudaStreamSynchronize", 10 * kUs, 2 * kUs, 100, -1);
  add(a, ActivityKind::kRuntime, "cudaMemcpy", 30 * kUs, 3 * kUs, 100, -1);
  add(a, ActivityKind::kRuntime, "cudaDeviceSynchronize", 60 * kUs, 4 * kUs, 100, -1);
  add(a, ActivityKind::kRuntime, "cudaStreamSynchronize", 60 * kUs, 4 * kUs, 101, -1);
  add(a, ActivityKind::kRuntime, "cudaStreamSynchronize", 500'000 * kUs, 4 * kUs, 100, -1);
  add(a, ActivityKind::kRuntime, "cudaLaunchKernel", 20 * kUs, kUs, 100, 77);
  gpu::shift_activities(a, kKinetoBehind);
  // WHEN the sites are found
  const auto sites = gpu::sync_sites(w.run, a);
  // THEN train() made two (5 us), log_metrics() one (4 us): the innermost
  // frame outside torch and built-ins, by time
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].where, "train.py:30(train)");
  EXPECT_EQ(sites[0].calls, 2u);
  EXPECT_EQ(sites[0].total_ns, 5 * kUs);
  EXPECT_EQ(sites[1].where, "metrics.py:12(log_metrics)");
  EXPECT_EQ(sites[1].calls, 1u);
}

TEST(GpuWindow, EachWindowStepIsBusyOrIdleForDataOrForTheCpu) {
  // GIVEN two window steps of 100 us on the main thread: in the first a
  // 30 us fetch, then kernels 40..70 and 60..90 on two streams (busy 50);
  // the second all busy but for 10 us of fetch at its start
  RunBuilder rb;
  rb.run.threads = {ThreadInfo{100, "MainThread"}};
  rb.event("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", OpKind::kUserScope, 0, 30 * kUs);
  rb.event("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", OpKind::kUserScope, 100 * kUs, 110 * kUs);
  rb.finish();
  StepAnalysis steps;
  for (int i = 0; i < 3; ++i) {
    Step st;
    st.start_ns = i * 100 * kUs;
    st.end_ns = st.start_ns + 100 * kUs;
    st.gpu_window = i < 2;  // the third is not the window's
    steps.steps.push_back(st);
  }
  Activities a;
  add(a, ActivityKind::kKernel, "k1", 40 * kUs, 30 * kUs, 7, 1);
  add(a, ActivityKind::kKernel, "k2", 60 * kUs, 30 * kUs, 8, 2);
  add(a, ActivityKind::kKernel, "k3", 110 * kUs, 90 * kUs, 7, 3);
  add(a, ActivityKind::kKernel, "k4", 220 * kUs, 50 * kUs, 7, 4);
  add(a, ActivityKind::kRuntime, "cudaLaunchKernel", 35 * kUs, 50 * kUs, 100, 1);  // host work: not device time
  gpu::shift_activities(a, kKinetoBehind);
  // WHEN split
  const auto w = gpu::window_step_gpu(rb.run, steps, a);
  // THEN per step: busy, idle while fetching, idle otherwise, summing to the step
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].step, 0u);
  EXPECT_EQ(w[0].busy_ns, 50 * kUs);
  EXPECT_EQ(w[0].idle_data_ns, 30 * kUs);
  EXPECT_EQ(w[0].idle_cpu_ns, 20 * kUs);  // 30..40 and 90..100
  EXPECT_EQ(w[1].busy_ns, 90 * kUs);
  EXPECT_EQ(w[1].idle_data_ns, 10 * kUs);
  EXPECT_EQ(w[1].idle_cpu_ns, 0);
}

TEST(GpuWindow, TheTracesBaseTimeIsRead) {
  // torch 2.x writes ts relative to baseTimeNanoseconds, after the events
  const std::string text =
      R"({"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,)"
      R"( "ts": 5.5, "dur": 1}], "baseTimeNanoseconds": 1790857026000000000})";
  EXPECT_EQ(kineto::parse_trace(text, "t.json").base_time_ns, 1790857026000000000);
  const std::string before =
      R"({"baseTimeNanoseconds": 1700000000000000000, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",)"
      R"( "pid": 1, "tid": 1, "ts": 5.5, "dur": 1}]})";
  EXPECT_EQ(kineto::parse_trace(before, "t.json").base_time_ns, 1700000000000000000);
  // AND an older trace without it: 0, its ts are absolute
  const std::string old = R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5.5, "dur": 1}]})";
  EXPECT_EQ(kineto::parse_trace(old, "t.json").base_time_ns, 0);
}

}  // namespace
}  // namespace torchneck
