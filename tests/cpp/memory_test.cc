// Resident memory and garbage collections: the sampler's bounded series,
// the line fit, the analyses against hand-built steps, and the two
// detectors (memory_creep, gc_pauses) on runs whose answer is known by
// construction.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "analyze/diagnosis.h"
#include "analyze/memory.h"
#include "collect/system/memory_sampler.h"
#include "core/clock.h"

namespace torchneck {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr double kMiB = 1024.0 * 1024.0;

// `n` steps of 100 ms from t = 1 s, the first one warm-up.
StepAnalysis steps_of(size_t n) {
  StepAnalysis s;
  for (size_t i = 0; i < n; ++i) {
    Step st;
    st.start_ns = 1000 * kMs + static_cast<int64_t>(i) * 100 * kMs;
    st.end_ns = st.start_ns + 100 * kMs;
    st.steady = i > 0;
    s.steps.push_back(st);
  }
  s.count = n;
  return s;
}

// Memory every 50 ms over the steps: rss(t) in bytes, t in steps since the first.
template <typename F>
torchneck::Run run_with_memory(size_t steps, F rss) {
  torchneck::Run run;
  run.memory_interval_ns = 50 * kMs;
  for (int64_t t = 1000 * kMs; t <= 1000 * kMs + static_cast<int64_t>(steps) * 100 * kMs; t += 50 * kMs)
    run.memory.push_back({t, static_cast<int64_t>(rss(static_cast<double>(t - 1000 * kMs) / (100.0 * kMs))), -1});
  return run;
}

std::vector<Finding> findings_of(const torchneck::Run& run, const StepAnalysis& steps, const char* id) {
  DiagnosisInput in;
  in.steps = steps;
  in.memory = analyze_memory(run, steps);
  in.gc = analyze_gc(run, steps);
  in.growing_graphs = run.growing_graphs;
  std::vector<Finding> out;
  for (Finding& f : run_detectors(in, Evidence::kCpu))
    if (f.id == id) out.push_back(std::move(f));
  return out;
}

TEST(MemorySeries, StaysBoundedAndCoversTheWholeRunWhenThinned) {
  // GIVEN a series of 8 samples at most
  MemorySeries s(8);
  // WHEN 100 ticks arrive, t = 0..99
  for (int64_t t = 0; t < 100; ++t) s.tick({t, 1000 + t, -1});
  // THEN at most 8 are kept, the first one among them, evenly spaced at the
  // stride, and the last one within a stride of the end
  const auto& v = s.samples();
  ASSERT_LE(v.size(), 8u);
  ASSERT_GE(v.size(), 4u);
  EXPECT_EQ(v.front().t_ns, 0);
  for (size_t i = 1; i < v.size(); ++i) EXPECT_EQ(v[i].t_ns - v[i - 1].t_ns, s.stride());
  EXPECT_GT(v.back().t_ns, 99 - s.stride());
  EXPECT_EQ(s.stride(), 16);
}

TEST(MemorySampler, SamplesThisProcessOnTheOpClock) {
  // GIVEN the sampler at 5 ms
  MemorySamplerOptions o;
  o.interval_ns = 5 * kMs;
  std::string error;
  const int64_t t0 = now_ns();
  ASSERT_TRUE(start_memory_sampler(o, &error)) << error;
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  torchneck::Run snap;
  EXPECT_TRUE(snapshot_memory_sampler(snap, 100 * kMs));
  stop_memory_sampler();
  const int64_t t1 = now_ns();
  torchneck::Run run;
  collect_memory_sampler(run);
  // THEN it took about one sample per interval, in time order, on now_ns()'s
  // clock, each with this process's resident size
  EXPECT_GE(run.memory.size(), 5u);
  EXPECT_LE(snap.memory.size(), run.memory.size());
  EXPECT_EQ(run.memory_interval_ns, 5 * kMs);
  const int64_t rss = resident_bytes();
  for (size_t i = 0; i < run.memory.size(); ++i) {
    const MemorySample& m = run.memory[i];
    EXPECT_GE(m.t_ns, t0);
    EXPECT_LE(m.t_ns, t1);
    if (i > 0) {
      EXPECT_GT(m.t_ns, run.memory[i - 1].t_ns);
    }
    EXPECT_GT(m.rss_bytes, rss / 2);
    EXPECT_EQ(m.torch_allocated_bytes, -1);
  }
  // AND a second session starts clean
  ASSERT_TRUE(start_memory_sampler(o, &error)) << error;
  stop_memory_sampler();
  torchneck::Run again;
  collect_memory_sampler(again);
  EXPECT_LE(again.memory.size(), 3u);
}

TEST(MemorySampler, ReadsTorchsAllocatorBesideEverySample) {
  // GIVEN the sampler at 5 ms with a source of torch's allocator figure
  static std::atomic<int64_t> figure{7};
  MemorySamplerOptions o;
  o.interval_ns = 5 * kMs;
  o.torch_allocated = [] { return figure.fetch_add(1); };
  std::string error;
  ASSERT_TRUE(start_memory_sampler(o, &error)) << error;
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  stop_memory_sampler();
  torchneck::Run run;
  collect_memory_sampler(run);
  // THEN every sample has the figure read at its time, in order
  ASSERT_GE(run.memory.size(), 3u);
  EXPECT_EQ(run.memory.front().torch_allocated_bytes, 7);
  for (size_t i = 1; i < run.memory.size(); ++i)
    EXPECT_GT(run.memory[i].torch_allocated_bytes, run.memory[i - 1].torch_allocated_bytes);
}

TEST(LineFit, RecoversALineAndItsFit) {
  const double t[] = {0, 1, 2, 3, 4};
  const double y[] = {10, 12, 14, 16, 18};
  const LineFit f = fit_line(t, y, 5);
  EXPECT_DOUBLE_EQ(f.slope, 2);
  EXPECT_DOUBLE_EQ(f.intercept, 10);
  EXPECT_DOUBLE_EQ(f.r2, 1);
  const double flat[] = {5, 5, 5, 5, 5};
  EXPECT_EQ(fit_line(t, flat, 5).r2, 0);
}

TEST(MemoryCreep, ALineRisingTenMiBAStepNamesTheGrowingGraph) {
  // GIVEN 40 steps, memory 300 MiB + 10 MiB per step, and the launcher's
  // growing graph
  const StepAnalysis steps = steps_of(40);
  torchneck::Run run = run_with_memory(40, [](double step) { return (300 + 10 * step) * kMiB; });
  run.growing_graphs = {{"total_loss", "train", "/w/train.py", 42, "total_loss += loss", 6, 156, 20000, 2, 32}};
  // WHEN analysed
  const MemoryAnalysis m = analyze_memory(run, steps);
  const auto found = findings_of(run, steps, "memory_creep");
  // THEN the fit over steps 1..39 is the line, and the finding names the
  // variable, its line and the fix
  EXPECT_TRUE(m.fitted);
  EXPECT_EQ(m.span.first, 1u);
  EXPECT_EQ(m.span.last, 39u);
  EXPECT_NEAR(m.growth_per_step_bytes / kMiB, 10, 0.01);
  EXPECT_NEAR(static_cast<double>(m.rss_steady_start) / kMiB, 310, 0.01);
  EXPECT_NEAR(m.fit.r2, 1, 1e-9);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].severity, Severity::kHigh);  // 390 MiB on 310: more than half
  EXPECT_EQ(found[0].title.rfind("total_loss (train.py:42: `total_loss += loss`) keeps every step's autograd graph alive", 0), 0u)
      << found[0].title;
  EXPECT_NE(found[0].recommendation.find("`total_loss += loss.item()`"), std::string::npos);
  EXPECT_FALSE(found[0].estimated_gain_pct.has_value());
}

TEST(MemoryCreep, AGraphRebuiltLargerEachStepIsNotWhatKeepsMemory) {
  // GIVEN memory rising 10 MiB a step, and the launcher's sight of a graph
  // that grows but is built anew every step (it holds no earlier one)
  const StepAnalysis steps = steps_of(40);
  torchneck::Run run = run_with_memory(40, [](double step) { return (300 + 10 * step) * kMiB; });
  run.growing_graphs = {{"loss", "main", "", 0, "", 47, 407, 20000, 2, 32}};
  run.growing_graphs[0].kept = false;
  // WHEN analysed
  const auto found = findings_of(run, steps, "memory_creep");
  // THEN memory_creep is there, but blames no graph
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].title.find("loss"), std::string::npos) << found[0].title;
  EXPECT_EQ(found[0].title.find("autograd graph"), std::string::npos) << found[0].title;
}

TEST(MemoryCreep, WithoutAGraphItSaysMemoryGrows) {
  const StepAnalysis steps = steps_of(40);
  const torchneck::Run run = run_with_memory(40, [](double step) { return (300 + 2 * step) * kMiB; });
  const auto found = findings_of(run, steps, "memory_creep");
  ASSERT_EQ(found.size(), 1u);  // 78 MiB on 302: >= 32 MiB and >= 10 %
  EXPECT_EQ(found[0].severity, Severity::kMedium);
  EXPECT_EQ(found[0].title, "Resident memory grows 2.00 MiB per step over the steady steps");
}

// rss(step) and torch(step): resident memory and torch's CPU allocator.
template <typename F, typename G>
torchneck::Run run_with_torch(size_t steps, F rss, G torch) {
  torchneck::Run run = run_with_memory(steps, rss);
  for (MemorySample& s : run.memory)
    s.torch_allocated_bytes = static_cast<int64_t>(torch(static_cast<double>(s.t_ns - 1000 * kMs) / (100.0 * kMs)));
  return run;
}

TEST(MemoryAnalysis, TorchsAllocatorIsFittedOverTheSameSamples) {
  // GIVEN resident memory rising 4 MiB a step and torch's allocator 3 MiB a
  // step from 20 MiB, over 40 steps of which 39 are steady
  const StepAnalysis steps = steps_of(40);
  const torchneck::Run run = run_with_torch(
      40, [](double step) { return (300 + 4 * step) * kMiB; }, [](double step) { return (20 + 3 * step) * kMiB; });
  // WHEN analysed
  const MemoryAnalysis m = analyze_memory(run, steps);
  // THEN the allocator's line starts at step 1 (23 MiB) and rises 3 MiB a
  // step over the 39 steady steps, and its first, last and peak are the samples'
  ASSERT_TRUE(m.torch_counted);
  EXPECT_NEAR(static_cast<double>(m.torch_steady_start) / kMiB, 23.0, 0.01);
  EXPECT_NEAR(m.torch_growth_bytes / kMiB, 3.0 * 39, 0.01);
  EXPECT_EQ(m.torch_first, static_cast<int64_t>(20 * kMiB));
  EXPECT_EQ(m.torch_last, static_cast<int64_t>((20 + 3 * 40) * kMiB));
  EXPECT_EQ(m.torch_peak, m.torch_last);
  // AND the resident line is unchanged by it
  EXPECT_NEAR(m.growth_bytes / kMiB, 4.0 * 39, 0.01);
}

TEST(MemoryAnalysis, OneSampleWithoutTheFigureMeansNotCounted) {
  const StepAnalysis steps = steps_of(20);
  torchneck::Run run = run_with_torch(
      20, [](double step) { return (300 + 4 * step) * kMiB; }, [](double) { return 20 * kMiB; });
  run.memory[3].torch_allocated_bytes = -1;
  const MemoryAnalysis m = analyze_memory(run, steps);
  EXPECT_FALSE(m.torch_counted);
  EXPECT_EQ(m.torch_peak, -1);
  EXPECT_EQ(m.torch_growth_bytes, 0);
}

TEST(MemoryCreep, TorchsAllocatorSaysWhetherTheMemoryKeptIsTensors) {
  const StepAnalysis steps = steps_of(40);
  const auto rss = [](double step) { return (300 + 4 * step) * kMiB; };
  // GIVEN resident memory rising 4 MiB a step, and torch's allocator rising
  // 2 MiB a step (tensors, with malloc's free space between them) ...
  const auto tensors = findings_of(run_with_torch(40, rss, [](double step) { return (20 + 2 * step) * kMiB; }), steps,
                                   "memory_creep");
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].title, "Resident memory grows 4.00 MiB per step over the steady steps");
  EXPECT_NE(tensors[0].evidence.back().find("(50.0 % of the resident growth): tensors are kept, the rest is malloc's"),
            std::string::npos)
      << tensors[0].evidence.back();
  // ... or flat but for 0.5 MiB: Python objects
  const auto objects = findings_of(run_with_torch(40, rss, [](double step) { return (20 + 0.0125 * step) * kMiB; }),
                                   steps, "memory_creep");
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(objects[0].title, "Resident memory grows 4.00 MiB per step over the steady steps, and not in tensors");
  EXPECT_NE(objects[0].evidence.back().find("the memory kept is not tensors"), std::string::npos);
  EXPECT_NE(objects[0].recommendation.find("Python objects"), std::string::npos);
  // AND without the figure the finding says nothing of tensors either way
  const auto unknown = findings_of(run_with_memory(40, rss), steps, "memory_creep");
  ASSERT_EQ(unknown.size(), 1u);
  for (const std::string& e : unknown[0].evidence) EXPECT_EQ(e.find("torch's CPU allocator"), std::string::npos) << e;
}

TEST(MemoryCreep, WhatTheProfilersOwnTimelineRecordedIsNotTheScripts) {
  // GIVEN 40 MiB of growth over the steady steps, and the operator timeline
  // recording 30 MiB of events meanwhile (655360 events of 48 bytes)
  const StepAnalysis steps = steps_of(40);
  torchneck::Run run = run_with_memory(40, [](double step) { return (300 + 1 * step) * kMiB; });
  run.strings = {"aten::add"};
  run.threads.resize(1);
  const size_t n = 655360;
  for (size_t i = 0; i < n; ++i) {
    OpEvent e{};
    e.start_ns = 1100 * kMs + static_cast<int64_t>(i) * (3800 * kMs / static_cast<int64_t>(n));
    e.end_ns = e.start_ns + 1;
    run.timeline.push_back(e);
  }
  // THEN 10 MiB is left for the script: no creep; without the events, low
  EXPECT_NEAR(analyze_memory(run, steps).recorded_bytes / kMiB, 30, 0.01);
  EXPECT_TRUE(findings_of(run, steps, "memory_creep").empty());
  run.timeline.clear();
  const auto found = findings_of(run, steps, "memory_creep");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].severity, Severity::kLow);  // 39 MiB on 301, no graph named
}

TEST(MemoryCreep, FlatNoisyLevellingOffOrOneJumpIsNoCreep) {
  const StepAnalysis steps = steps_of(40);
  // flat with +-8 MiB of noise
  const torchneck::Run noisy = run_with_memory(40, [](double step) { return (300 + 8 * std::sin(step * 7.0)) * kMiB; });
  EXPECT_TRUE(findings_of(noisy, steps, "memory_creep").empty());
  // too small: 0.5 MiB a step, 20 MiB in all
  const torchneck::Run small = run_with_memory(40, [](double step) { return (300 + 0.5 * step) * kMiB; });
  EXPECT_TRUE(findings_of(small, steps, "memory_creep").empty());
  // an allocator warming up: +150 MiB over the first steps, then flat
  const torchneck::Run warm = run_with_memory(40, [](double step) { return (300 + 150 * (1 - std::exp(-step / 8))) * kMiB; });
  EXPECT_TRUE(findings_of(warm, steps, "memory_creep").empty());
  // one jump of 200 MiB at step 35 (a cache filled once)
  const torchneck::Run jump = run_with_memory(40, [](double step) { return (300 + (step >= 35 ? 200 : 0)) * kMiB; });
  EXPECT_TRUE(findings_of(jump, steps, "memory_creep").empty());
  // no memory samples at all
  EXPECT_TRUE(findings_of(torchneck::Run{}, steps, "memory_creep").empty());
}

// Collections of `ns` each, `per_step` in every step (in its first half).
torchneck::Run run_with_gc(const StepAnalysis& steps, int per_step, int64_t ns) {
  torchneck::Run run;
  run.gc_observed = true;
  for (const Step& st : steps.steps)
    for (int k = 0; k < per_step; ++k) {
      const int64_t a = st.start_ns + k * (ns + kMs);
      run.gc_pauses.push_back({a, a + ns, k % 3 == 2 ? 2 : 0, 10});
      ++run.gc.collections;
      run.gc.total_ns += ns;
      run.gc.max_ns = ns;
    }
  return run;
}

TEST(GcPauses, CollectionsATenthOfTheStepsFire) {
  // GIVEN 20 steps of 100 ms, each with 5 collections of 2 ms (10 %)
  const StepAnalysis steps = steps_of(20);
  const torchneck::Run run = run_with_gc(steps, 5, 2 * kMs);
  // WHEN analysed
  const GcAnalysis g = analyze_gc(run, steps);
  const auto found = findings_of(run, steps, "gc_pauses");
  // THEN the steady steps hold 19 x 5 collections, 10 % of their time
  EXPECT_EQ(g.collections, 95u);
  EXPECT_NEAR(g.share, 0.10, 1e-9);
  EXPECT_EQ(g.by_generation[2], 19u);
  EXPECT_FALSE(g.estimated);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].severity, Severity::kMedium);
  EXPECT_EQ(found[0].title, "Garbage collection takes 10.0 % of the steady steps");
  EXPECT_NEAR(*found[0].estimated_gain_pct, 5.0, 1e-9);
  EXPECT_NE(found[0].recommendation.find("gc.freeze()"), std::string::npos);
}

TEST(GcPauses, ShortOrRareCollectionsDoNot) {
  const StepAnalysis steps = steps_of(20);
  // 1 % of the steps
  EXPECT_TRUE(findings_of(run_with_gc(steps, 1, 1 * kMs), steps, "gc_pauses").empty());
  // two long pauses in the whole run (an explicit gc.collect()): an event
  torchneck::Run two = run_with_gc(steps, 0, 0);
  two.gc_pauses = {{1500 * kMs, 1560 * kMs, 2, 0}, {2000 * kMs, 2060 * kMs, 2, 0}};
  EXPECT_TRUE(findings_of(two, steps, "gc_pauses").empty());
  // not observed at all
  torchneck::Run none = run_with_gc(steps, 5, 2 * kMs);
  none.gc_observed = false;
  EXPECT_TRUE(findings_of(none, steps, "gc_pauses").empty());
}

TEST(GcPauses, BeyondTheListTheTotalsAreScaledToTheSteadySteps) {
  // GIVEN a list cut after the first step, totals of 20 % of a 2 s run
  const StepAnalysis steps = steps_of(20);
  torchneck::Run run = run_with_gc(steps, 5, 2 * kMs);
  run.gc_pauses.resize(5);
  run.gc.dropped = 95;
  run.gc.total_ns = 400 * kMs;
  run.run.wall_s = 2.0;
  // WHEN analysed: the share is the totals' over the wall time
  const GcAnalysis g = analyze_gc(run, steps);
  EXPECT_TRUE(g.estimated);
  EXPECT_NEAR(g.share, 0.20, 1e-6);
  const auto found = findings_of(run, steps, "gc_pauses");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].severity, Severity::kHigh);
  EXPECT_NE(found[0].evidence[0].find("estimated"), std::string::npos);
}

}  // namespace
}  // namespace torchneck
