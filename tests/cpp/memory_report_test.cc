// The memory and GC parts of the reports, on a hand-built run of 40
// optimizer steps whose memory rises 10 MiB a step and which collects
// garbage twice a step: the terminal line, profile.json's objects and
// trace.json's counter track and GC slices.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "analyze/analysis.h"
#include "report/profile_json.h"
#include "report/terminal_report.h"
#include "report/trace_json.h"

namespace torchneck {
namespace {

using nlohmann::json;
constexpr int64_t kMs = 1'000'000;

torchneck::Run leaky_run() {
  torchneck::Run run;
  run.threads.push_back({1, "MainThread"});
  run.strings = {"Optimizer.step#SGD.step", "aten::mm"};
  run.env.optimizers = {OptimizerFacts{"SGD", 1, false}};
  for (int i = 0; i < 40; ++i) {
    const int64_t t = 1000 * kMs + i * 100 * kMs;
    OpEvent mm{};
    mm.start_ns = t + 10 * kMs;
    mm.end_ns = t + 80 * kMs;
    mm.name_id = 1;
    OpEvent step{};
    step.start_ns = t + 90 * kMs;
    step.end_ns = t + 99 * kMs;
    step.name_id = 0;
    step.kind = OpKind::kUserScope;
    run.timeline.push_back(mm);
    run.timeline.push_back(step);
    for (int k = 0; k < 2; ++k) {
      const int64_t a = t + 20 * kMs + k * 30 * kMs;
      run.gc_pauses.push_back({a, a + 5 * kMs, k, 100});
      ++run.gc.collections;
      run.gc.total_ns += 5 * kMs;
      ++run.gc.by_generation[k];
      run.gc.ns_by_generation[k] += 5 * kMs;
    }
  }
  run.gc.max_ns = 5 * kMs;
  run.gc_observed = true;
  for (int64_t t = 1000 * kMs; t <= 5000 * kMs; t += 50 * kMs)
    run.memory.push_back({t, (int64_t{300} << 20) + (t - 1000 * kMs) / (100 * kMs) * (int64_t{10} << 20),
                          (int64_t{50} << 20) + (t - 1000 * kMs) / (100 * kMs) * (int64_t{8} << 20)});
  run.memory_interval_ns = 50 * kMs;
  return run;
}

TEST(MemoryReport, TerminalLineProfileJsonAndTraceTracks) {
  // GIVEN the run, analysed
  const torchneck::Run run = leaky_run();
  const Analysis a = analyze(run, SummaryOptions{});
  ASSERT_GE(a.steps.steps.size(), 39u);
  // THEN the terminal report has the memory and GC lines, and both findings
  const std::string text = terminal_report(run, a, TerminalReportOptions{""});
  EXPECT_NE(text.find("Memory: resident "), std::string::npos) << text;
  EXPECT_NE(text.find("MiB per step, line fit R^2 1.00"), std::string::npos) << text;
  EXPECT_NE(text.find("  torch's CPU allocator: "), std::string::npos) << text;
  EXPECT_NE(text.find("Garbage collections: 80 in the run, 400.0 ms, longest 5.00 ms; 10.0 % of the steady steps"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("memory_creep: Resident memory grows"), std::string::npos) << text;
  EXPECT_NE(text.find("gc_pauses: Garbage collection takes 10.0 %"), std::string::npos) << text;
  // AND profile.json's memory and gc objects say the same
  const json p = json::parse(profile_json(run, a));
  EXPECT_TRUE(p["memory"]["sampled"]);
  EXPECT_EQ(p["memory"]["series"].size(), run.memory.size());
  EXPECT_EQ(p["memory"]["series"][0][2], int64_t{50} << 20);
  EXPECT_TRUE(p["memory"]["torch_counted"]);
  EXPECT_NEAR(p["memory"]["steady"]["torch_growth_bytes"].get<double>() / (1 << 20), 8.0 * 39, 1.0);
  EXPECT_NEAR(p["memory"]["steady"]["growth_per_step_bytes"].get<double>() / (1 << 20), 10.0, 0.5);
  EXPECT_EQ(p["gc"]["collections"], 80);
  EXPECT_EQ(p["gc"]["by_generation"][1]["collections"], 40);
  EXPECT_NEAR(p["gc"]["steady"]["share"].get<double>(), 0.10, 0.01);
  // AND trace.json draws the memory as a counter and the pauses as slices
  // of their own track, inside the window's steps
  const json t = json::parse(trace_json(run, a, TraceJsonOptions{}));
  size_t counters = 0, gcs = 0;
  bool gc_track_named = false;
  for (const json& e : t["traceEvents"]) {
    if (e["ph"] == "C") {
      ++counters;
      EXPECT_GT(e["args"]["rss"].get<double>(), 299.0);
      EXPECT_GT(e["args"]["torch_cpu"].get<double>(), 49.0);
      EXPECT_LT(e["args"]["torch_cpu"].get<double>(), e["args"]["rss"].get<double>() - 249.0);
    }
    if (e["ph"] == "X" && e["cat"] == "gc") ++gcs;
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "Garbage collections") gc_track_named = true;
  }
  EXPECT_GE(counters, 10u);
  EXPECT_GE(gcs, 10u);
  EXPECT_LT(gcs, 80u);  // only the window's steps
  EXPECT_TRUE(gc_track_named);
}

}  // namespace
}  // namespace torchneck
