// The NVML parts of the analysis and the reports, on a hand-built run of 40
// optimizer steps (1 s to 5 s) whose GPU 0 is 80 % busy during the steps and
// idle before and after them, with a throttled SM clock for half a second,
// and whose GPU 1 reads no utilisation and falls off the bus at 3 s.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "analyze/analysis.h"
#include "report/profile_json.h"
#include "report/terminal_report.h"
#include "report/trace_json.h"
#include "run_builder.h"

namespace torchneck {
namespace {

using nlohmann::json;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kGiB = int64_t{1} << 30;

torchneck::Run gpu_run() {
  // 40 optimizer steps of 100 ms from 1 s, each a matmul and its step
  test_support::RunBuilder b;
  b.run.threads.push_back({1, "MainThread"});
  b.run.env.optimizers = {OptimizerFacts{"SGD", 1, false}};
  for (int64_t t = 1000 * kMs; t < 5000 * kMs; t += 100 * kMs) {
    b.event("aten::mm", OpKind::kOperator, t + 10 * kMs, t + 80 * kMs);
    b.event("Optimizer.step#SGD.step", OpKind::kUserScope, t + 90 * kMs, t + 99 * kMs);
  }
  b.finish();
  torchneck::Run run = std::move(b.run);
  run.nvml_devices = {{0, "NVIDIA H200", "GPU-aaaa", 140 * kGiB, -1}, {3, "NVIDIA H100", "GPU-bbbb", 80 * kGiB, 3000 * kMs}};
  for (int64_t t = 0; t <= 5500 * kMs; t += 50 * kMs) {
    const bool stepping = t >= 1000 * kMs && t <= 5000 * kMs;
    const bool throttled = t >= 2000 * kMs && t < 2500 * kMs;
    const int64_t used = t <= 4000 * kMs ? t / (100 * kMs) * (kGiB / 4) : 10 * kGiB;  // peak 10 GiB at 4 s
    run.nvml.push_back({t, 0, stepping ? 80 : 0, stepping ? 30 : 0, throttled ? 1500 : 1980, used, 300'000});
    if (t < 3000 * kMs) run.nvml.push_back({t, 1, -1, -1, -1, kGiB, -1});
  }
  run.nvml_interval_ns = 50 * kMs;
  return run;
}

TEST(NvmlReport, AnalysisSaysHowBusyEachGpuWasOverTheRunAndTheSteadySteps) {
  // GIVEN the run, analysed
  const torchneck::Run run = gpu_run();
  const Analysis a = analyze(run, SummaryOptions{});
  ASSERT_TRUE(a.nvml.sampled);
  ASSERT_EQ(a.nvml.devices.size(), 2u);
  ASSERT_TRUE(a.nvml.span.found);
  // THEN GPU 0's mean over the run is the share of its samples in the steps
  // times 80, and exactly 80 over the steady steps
  size_t n = 0, busy = 0;
  for (const NvmlSample& s : run.nvml)
    if (s.device == 0) {
      ++n;
      busy += s.gpu_util_pct == 80;
    }
  const NvmlDeviceSummary& g0 = a.nvml.devices[0];
  EXPECT_EQ(g0.samples, n);
  EXPECT_NEAR(g0.gpu_util_mean, 80.0 * static_cast<double>(busy) / static_cast<double>(n), 1e-9);
  EXPECT_LT(g0.gpu_util_mean, 70.0);
  EXPECT_DOUBLE_EQ(g0.gpu_util_steady_mean, 80.0);
  EXPECT_GT(g0.steady_samples, 60u);
  EXPECT_EQ(g0.gpu_util_peak, 80);
  EXPECT_EQ(g0.mem_used_peak, 10 * kGiB);
  EXPECT_EQ(g0.mem_total, 140 * kGiB);
  EXPECT_DOUBLE_EQ(g0.power_mean_mw, 300'000.0);
  EXPECT_EQ(g0.sm_clock_min, 1500);
  EXPECT_EQ(g0.sm_clock_max, 1980);
  // AND GPU 1, which read no utilisation, has none, and its memory
  const NvmlDeviceSummary& g1 = a.nvml.devices[1];
  EXPECT_EQ(g1.gpu_util_mean, -1);
  EXPECT_EQ(g1.gpu_util_steady_mean, -1);
  EXPECT_EQ(g1.power_mean_mw, -1);
  EXPECT_EQ(g1.mem_used_peak, kGiB);
  EXPECT_EQ(g1.samples, 60u);
}

TEST(NvmlReport, TerminalLineProfileJsonAndTraceCounters) {
  const torchneck::Run run = gpu_run();
  const Analysis a = analyze(run, SummaryOptions{});
  // THEN the terminal report has one line per GPU
  const std::string text = terminal_report(run, a, TerminalReportOptions{""});
  char want[200];
  std::snprintf(want, sizeof want,
                "GPU 0 (NVIDIA H200): utilisation mean %.0f %% (steady steps 80 %%), peak memory 10240 MiB of "
                "143360, power 300 W, SM clock 1500..1980 MHz (111 samples)\n",
                a.nvml.devices[0].gpu_util_mean);
  EXPECT_NE(text.find(want), std::string::npos) << text;
  EXPECT_NE(text.find("GPU 1 (NVIDIA H100): utilisation unknown, peak memory 1024 MiB of 81920, lost during the run "
                      "(60 samples)\n"),
            std::string::npos)
      << text;
  // AND profile.json's nvml object has the devices, their summaries and
  // their series, null where NVML read nothing, ms since the first sample
  const json p = json::parse(profile_json(run, a));
  const json& nv = p["nvml"];
  EXPECT_TRUE(nv["sampled"]);
  EXPECT_DOUBLE_EQ(nv["interval_ms"].get<double>(), 50.0);
  ASSERT_EQ(nv["devices"].size(), 2u);
  const json& d0 = nv["devices"][0];
  EXPECT_EQ(d0["name"], "NVIDIA H200");
  EXPECT_EQ(d0["uuid"], "GPU-aaaa");
  EXPECT_EQ(d0["memory_total_bytes"], 140 * kGiB);
  EXPECT_TRUE(d0["lost_ms"].is_null());
  EXPECT_DOUBLE_EQ(d0["gpu_util_steady_mean_pct"].get<double>(), 80.0);
  EXPECT_EQ(d0["sm_clock_min_mhz"], 1500);
  ASSERT_EQ(d0["series"].size(), 111u);
  EXPECT_EQ(d0["series"][20], json::parse("[1000.0, 80, 30, 2684354560, 1980, 300000]"));
  const json& d1 = nv["devices"][1];
  EXPECT_EQ(d1["nvml_index"], 3);
  EXPECT_DOUBLE_EQ(d1["lost_ms"].get<double>(), 3000.0);
  EXPECT_TRUE(d1["gpu_util_mean_pct"].is_null());
  ASSERT_EQ(d1["series"].size(), 60u);
  EXPECT_EQ(d1["series"][1], json::parse("[50.0, null, null, 1073741824, null, null]"));
  // AND trace.json has GPU 0's four counter tracks inside the window's
  // steps, GPU 1's memory, and no GPU 1 utilisation (it read none)
  const json t = json::parse(trace_json(run, a, TraceJsonOptions{}));
  std::map<std::string, size_t> counters;
  double last_ts = 0, first_ts = 1e300;
  for (const json& e : t["traceEvents"]) {
    if (e["ph"] != "C") continue;
    const std::string name = e["name"];
    ++counters[name];
    if (name == "GPU 0 utilisation (%)") {
      EXPECT_EQ(e["args"]["gpu"].get<double>(), 80.0) << e.dump();
      last_ts = std::max(last_ts, e["ts"].get<double>());
      first_ts = std::min(first_ts, e["ts"].get<double>());
    }
    if (name == "GPU 0 power (W)") {
      EXPECT_EQ(e["args"]["power"].get<double>(), 300.0);
    }
  }
  EXPECT_GE(counters["GPU 0 utilisation (%)"], 5u);
  EXPECT_LT(counters["GPU 0 utilisation (%)"], 100u);  // only the window's
  EXPECT_EQ(counters["GPU 0 memory (MiB)"], counters["GPU 0 utilisation (%)"]);
  EXPECT_EQ(counters["GPU 0 SM clock (MHz)"], counters["GPU 0 utilisation (%)"]);
  EXPECT_EQ(counters["GPU 0 power (W)"], counters["GPU 0 utilisation (%)"]);
  EXPECT_GE(counters["GPU 1 memory (MiB)"], 1u);
  EXPECT_EQ(counters.count("GPU 1 utilisation (%)"), 0u);
  EXPECT_LT(last_ts - first_ts, 4000.0 * 1000);
}

TEST(NvmlReport, ARunWithoutNvmlShowsNoGpu) {
  // GIVEN a run with nothing from NVML (a CPU-only machine)
  torchneck::Run run = gpu_run();
  run.nvml.clear();
  run.nvml_devices.clear();
  run.nvml_interval_ns = 0;
  const Analysis a = analyze(run, SummaryOptions{});
  // THEN no report shows a GPU
  EXPECT_FALSE(a.nvml.sampled);
  EXPECT_EQ(terminal_report(run, a, TerminalReportOptions{""}).find("GPU 0"), std::string::npos);
  const json p = json::parse(profile_json(run, a));
  EXPECT_FALSE(p["nvml"]["sampled"]);
  EXPECT_TRUE(p["nvml"]["devices"].empty());
  EXPECT_EQ(trace_json(run, a, TraceJsonOptions{}).find("\"GPU 0 "), std::string::npos);
}

}  // namespace
}  // namespace torchneck
