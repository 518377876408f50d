// torchneck diff on hand-built profiles whose answer is known by
// construction: the interval of a planted change, no change between two
// samples of one distribution, no interval from too few steps, movers,
// findings resolved / new / kept, the regression gate, and profile.json read
// back.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <random>
#include <string>

#include "compare/diff.h"
#include "compare/diff_report.h"
#include "compare/profile_view.h"

namespace torchneck::compare {
namespace {

// `n` steps of `ms` on average, Gaussian noise of `sd`, a stream of its own.
std::vector<double> steps(size_t n, double ms, double sd, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, sd);
  std::vector<double> v;
  for (size_t i = 0; i < n; ++i) v.push_back(ms + noise(rng));
  return v;
}

ProfileView view(const std::vector<double>& steady, double data_ms) {
  ProfileView p;
  p.label = "run";
  p.script = "/w/train.py";
  p.steady_ms = steady;
  p.step_count = static_cast<int64_t>(steady.size()) + 1;
  p.in_window = p.step_count;
  p.phases = {{"data", data_ms}, {"forward", 10}, {"backward", 20}};
  return p;
}

TEST(Diff, APlantedSpeedUpLiesInsideItsInterval) {
  // GIVEN 60 steps of 100 ms (sd 10) before and 60 of 70 ms (sd 10) after,
  // the data phase 40 -> 10 ms
  ProfileView b = view(steps(60, 100, 10, 1), 40);
  ProfileView a = view(steps(60, 70, 10, 2), 10);
  b.findings = {{"input_bound", "high", "Input-bound", 35.0, 31.0}, {"heavy_layer", "medium", "fc", 20.0, std::nullopt}};
  a.findings = {{"heavy_layer", "high", "fc", 25.0, std::nullopt}, {"gc_pauses", "medium", "GC", std::nullopt, std::nullopt},
                {"framework_overhead", "low", "tiny", std::nullopt, std::nullopt}};
  const RunDiff d = diff_profiles(b, a);
  // THEN the change is the samples' ratio, -30 % give or take, inside a
  // significant interval that excludes 0
  EXPECT_NEAR(d.change_pct, -30, 4);
  ASSERT_TRUE(d.ci95_pct.has_value());
  EXPECT_LT(d.ci95_pct->low, d.change_pct);
  EXPECT_GT(d.ci95_pct->high, d.change_pct);
  EXPECT_LT(d.ci95_pct->high, 0);
  EXPECT_TRUE(d.significant);
  // AND the data phase moved most
  ASSERT_FALSE(d.phases.empty());
  EXPECT_EQ(d.phases[0].name, "data");
  EXPECT_DOUBLE_EQ(d.phases[0].delta_ms, -30);
  // AND input_bound is resolved with its estimate beside the change, heavy
  // layer kept, gc_pauses new, the low one nowhere
  ASSERT_EQ(d.findings.size(), 3u);
  EXPECT_EQ(d.findings[0].id, "input_bound");
  EXPECT_EQ(d.findings[0].state, FindingState::kResolved);
  ASSERT_TRUE(d.findings[0].estimated_change_pct.has_value());
  EXPECT_DOUBLE_EQ(*d.findings[0].estimated_change_pct, -35.0);
  EXPECT_EQ(d.findings[1].id, "gc_pauses");
  EXPECT_EQ(d.findings[1].state, FindingState::kNew);
  EXPECT_EQ(d.findings[2].id, "heavy_layer");
  EXPECT_EQ(d.findings[2].state, FindingState::kKept);
  const std::string text = diff_text(d);
  EXPECT_NE(text.find("estimated -35.0 %, measured by --try -31.0 %, measured -"), std::string::npos) << text;
  EXPECT_EQ(diff_verdict(d).rfind("Faster: ", 0), 0u) << diff_verdict(d);
  // AND it is no regression
  EXPECT_EQ(slower_gate(d, 0), Gate::kPass);
}

TEST(Diff, TwoSamplesOfOneDistributionAreRarelyAChange) {
  // GIVEN 200 pairs of runs of 40 steps, each drawn from 100 ms (sd 15):
  // the standard error of their change is ~3.4 %, above the floor
  int significant = 0, covered = 0;
  for (uint64_t k = 0; k < 200; ++k) {
    const RunDiff d = diff_profiles(view(steps(40, 100, 15, 100 + 2 * k), 30), view(steps(40, 100, 15, 101 + 2 * k), 30));
    significant += d.significant;
    covered += d.ci95_pct && d.ci95_pct->low <= 0 && 0 <= d.ci95_pct->high;
  }
  // THEN the interval covers the true change, 0, near 95 % of the time
  // (the percentile bootstrap is a little short on 40 steps), and few
  // pairs are called a change
  std::printf("covered %d of 200, significant %d\n", covered, significant);
  EXPECT_GE(covered, 182);
  EXPECT_LE(significant, 16);
}

TEST(Diff, AFindingThatFlipsWithoutAChangeIsNotedAsNearItsThreshold) {
  // GIVEN two samples of one distribution, framework_overhead only before
  // and gc_pauses only after
  ProfileView b = view(steps(40, 100, 5, 7), 30);
  ProfileView a = view(steps(40, 100, 5, 8), 30);
  b.findings = {{"framework_overhead", "medium", "tiny", 40.0, std::nullopt}};
  a.findings = {{"gc_pauses", "medium", "GC", std::nullopt, std::nullopt}};
  const RunDiff d = diff_profiles(b, a);
  ASSERT_FALSE(d.significant) << d.change_pct;
  // THEN each is listed as it is (resolved, new) and noted as a likely
  // threshold crossing, not a fix
  ASSERT_EQ(d.findings.size(), 2u);
  EXPECT_EQ(d.findings[0].state, FindingState::kResolved);
  ASSERT_EQ(d.notes.size(), 2u);
  EXPECT_EQ(d.notes[0].rfind("framework_overhead is resolved with no significant change in step time", 0), 0u) << d.notes[0];
  EXPECT_EQ(d.notes[1].rfind("gc_pauses is new with no significant change", 0), 0u) << d.notes[1];
  // AND a real change gets no such note
  const RunDiff faster = diff_profiles(b, view(steps(40, 60, 5, 9), 30));
  ASSERT_TRUE(faster.significant);
  EXPECT_TRUE(faster.notes.empty()) << faster.notes[0];
}

TEST(Diff, ATrendInsideARunWidensTheInterval) {
  // GIVEN the same mean before and after, once as noise and once as a
  // steady climb inside each run (steps 50 .. 150 ms)
  std::vector<double> climb;
  for (int i = 0; i < 60; ++i) climb.push_back(50 + 100.0 * i / 59);
  std::vector<double> flat(60, 100);
  for (size_t i = 0; i < flat.size(); ++i) flat[i] += (i % 2 ? 1 : -1);
  const Interval iid = bootstrap_change_ci(flat, flat, 2, 2000, 7);
  const Interval blocks = bootstrap_change_ci(climb, climb, 4, 2000, 7);
  // THEN the climbing runs' interval is far wider
  EXPECT_GT(blocks.high - blocks.low, 10 * (iid.high - iid.low));
}

TEST(Diff, ASlowdownBeyondThePercentageFailsTheGate) {
  const RunDiff d = diff_profiles(view(steps(50, 100, 5, 3), 30), view(steps(50, 120, 5, 4), 30));
  EXPECT_TRUE(d.significant);
  EXPECT_EQ(slower_gate(d, 10), Gate::kSlower);
  EXPECT_EQ(slower_gate(d, 30), Gate::kPass);
}

TEST(Diff, TooFewStepsGiveNoIntervalAnywhere) {
  // GIVEN 3 steady steps a side (kMinSteps is 5), AFTER 66 times slower
  const RunDiff d = diff_profiles(view({3, 3, 3}, 1), view({198, 200, 202}, 1));
  // THEN the change is the means' ratio, nothing is called significant
  EXPECT_NEAR(d.change_pct, 100 * (200.0 / 3 - 1), 1e-6);
  EXPECT_FALSE(d.significant);
  // AND no interval is printed or written: the text says why, diff.json has
  // null for the interval and its block
  const std::string text = diff_text(d);
  EXPECT_EQ(text.find("95 %"), std::string::npos) << text;
  EXPECT_NE(text.find("too few steady steps: 3 before, 3 after (an interval needs 5 in each)"), std::string::npos)
      << text;
  const auto json = nlohmann::json::parse(diff_json(d));
  EXPECT_TRUE(json["ci95_pct"].is_null()) << json["ci95_pct"];
  EXPECT_TRUE(json["block_length"].is_null()) << json["block_length"];
  EXPECT_FALSE(json["significant"].get<bool>());
  EXPECT_EQ(json["verdict"].get<std::string>().find("95 %"), std::string::npos) << json["verdict"];
  EXPECT_EQ(diff_html(d).find("95 %"), std::string::npos);
}

TEST(Diff, TheGateCannotDecideOnTooFewSteps) {
  // GIVEN AFTER 66 times slower, with fewer than 5 steady steps on one side
  // or both, then with 5 on each
  const std::vector<double> few_fast(4, 3), few_slow(4, 200);
  const std::vector<double> many_fast = steps(60, 3, 0.1, 5), many_slow = steps(60, 200, 5, 6);
  for (const auto& [before, after] : {std::pair{few_fast, few_slow}, std::pair{many_fast, few_slow},
                                      std::pair{few_fast, many_slow}}) {
    const RunDiff d = diff_profiles(view(before, 1), view(after, 1));
    // THEN the gate cannot decide (and says why), with no interval
    EXPECT_FALSE(d.ci95_pct.has_value());
    EXPECT_EQ(slower_gate(d, 10), Gate::kUndecided) << before.size() << " before, " << after.size() << " after";
    EXPECT_EQ(no_interval_reason(d), "too few steady steps: " + std::to_string(before.size()) + " before, " +
                                         std::to_string(after.size()) + " after (an interval needs 5 in each)");
  }
  const RunDiff five = diff_profiles(view(steps(5, 3, 0.1, 7), 1), view(steps(5, 200, 5, 8), 1));
  ASSERT_TRUE(five.ci95_pct.has_value());
  EXPECT_EQ(slower_gate(five, 10), Gate::kSlower);
}

TEST(DiffReport, NamesShowTheirControlsEscapedAndIsolated) {
  // GIVEN runs whose label, script path and a Python function hold a screen
  // clear, a terminal title and a right-to-left override
  const std::string controls = "\x1b[2J\x1b]0;pwned\x07\xe2\x80\xae";
  ProfileView b = view(steps(10, 100, 5, 11), 30), a = view(steps(10, 100, 5, 12), 30);
  b.label = a.label = "run" + controls;
  b.script = a.script = "/w" + controls + "/train.py";
  b.python = a.python = {{"train.py(step" + controls + ")", 4.0}};
  const RunDiff d = diff_profiles(b, a);
  const std::string shown = "\\x1b[2J\\x1b]0;pwned\\x07\\u202e";
  // THEN the text shows each control escaped and none raw
  const std::string text = diff_text(d);
  EXPECT_EQ(text.find_first_of("\x1b\x07"), std::string::npos) << text;
  EXPECT_EQ(text.find("\xe2\x80\xae"), std::string::npos) << text;
  EXPECT_NE(text.find("before: run" + shown + " (/w" + shown + "/train.py)"), std::string::npos) << text;
  EXPECT_NE(text.find("train.py(step" + shown + ")"), std::string::npos) << text;
  // AND the page too, each name in the header in its own <bdi>
  const std::string html = diff_html(d);
  EXPECT_EQ(html.find_first_of("\x1b\x07"), std::string::npos);
  EXPECT_EQ(html.find("\xe2\x80\xae"), std::string::npos);
  EXPECT_NE(html.find("before: <bdi>run" + shown + "</bdi> (<bdi>/w" + shown + "/train.py</bdi>)"), std::string::npos)
      << html.substr(0, 2000);
}

TEST(ProfileView, ReadsAProfileAndRefusesOtherJson) {
  const std::string json = R"({"schema":"torchneck.profile/2","run":{"script":"/w/t.py","argv":["t.py","--x"]},
    "env":{"torch":"2.6.0"},
    "steps":{"count":4,"in_window":4,"step_ms":10,"breakdown_ms":{"data":2,"forward":8},
      "per_step":[{"ms":30,"steady":false,"gpu_window":false},{"ms":10,"steady":true,"gpu_window":false},
                  {"ms":11,"steady":true,"gpu_window":true},{"ms":9,"steady":true,"gpu_window":false}]},
    "layers":[{"name":"net","forward_ms":9,"backward_ms":13,"leaf":false},
              {"name":"fc","forward_ms":8,"backward_ms":12,"leaf":true}],
    "ops":[{"name":"aten::addmm","self_ms":4}],
    "python":[{"function":"f","file":"/w/t.py","line":3,"self_ms":2}],
    "findings":[{"id":"input_bound","severity":"high","title":"T","estimated_gain_pct":null}],
    "verdict":"V"})";
  const ProfileView p = read_profile(json, "x");
  EXPECT_EQ(p.script, "/w/t.py");
  EXPECT_EQ(p.torch_version, "2.6.0");
  EXPECT_EQ(p.steady_ms, (std::vector<double>{10, 9}));  // the GPU window's step left out
  ASSERT_EQ(p.layers.size(), 1u);
  EXPECT_EQ(p.layers[0].name, "fc");              // the container left out
  EXPECT_DOUBLE_EQ(p.layers[0].ms_per_step, 5);  // 20 ms over 4 steps
  EXPECT_EQ(p.python[0].name, "t.py(f)");
  EXPECT_FALSE(p.findings[0].estimated_gain_pct.has_value());
  EXPECT_EQ(p.phases.size(), 2u);
  try {
    read_profile(R"({"traceEvents":[]})", "trace.json");
    FAIL() << "read a Kineto trace as a profile";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("trace.json: not a torchneck profile", 0), 0u) << e.what();
  }
  EXPECT_THROW(read_profile("{\"schema\":", "cut.json"), std::runtime_error);
  // A profile missing every array (argv, per_step, the tables) reads as empty
  // ones: iterating a missing array once read through a null pointer.
  const ProfileView bare = read_profile(R"({"schema":"torchneck.profile/2","run":{},"steps":{}})", "bare.json");
  EXPECT_TRUE(bare.argv.empty() && bare.steady_ms.empty() && bare.layers.empty() && bare.findings.empty());
}

// Under detail windows the layer and operator tables cover the detailed
// steps only; the scopes (user_scope) every step. Two runs with windows of
// different lengths must still give the same layer the same time per step.
TEST(ProfileView, DetailWindowsDivideByTheDetailedSteps) {
  const auto profile = [](int detailed, int count) {
    std::string steps;
    for (int i = 0; i < count; ++i)
      steps += std::string(i ? "," : "") + R"({"ms":10,"steady":true,"gpu_window":false,"detailed":)" +
               (i < detailed ? "true" : "false") + "}";
    const std::string n = std::to_string(detailed), c = std::to_string(count);
    // fc: 3 ms a detailed step; addmm 1 ms a detailed step; the fetch 2 ms every step.
    return R"({"schema":"torchneck.profile/2","run":{"script":"t.py"},
      "steps":{"count":)" + c + R"(,"in_window":)" + c + R"(,"detail":"window","per_step":[)" + steps + R"(]},
      "layers":[{"name":"fc","forward_ms":)" + std::to_string(detailed) + R"(,"backward_ms":)" +
           std::to_string(2 * detailed) + R"(,"leaf":true}],
      "ops":[{"name":"aten::addmm","kind":"operator","self_ms":)" + n + R"(},
             {"name":"DataLoader.__next__","kind":"user_scope","self_ms":)" + std::to_string(2 * count) + "}]}";
  };
  for (const auto& [detailed, count] : {std::pair{7, 40}, std::pair{28, 40}, std::pair{13, 13}}) {
    const ProfileView p = read_profile(profile(detailed, count), "x");
    EXPECT_EQ(p.detailed_steps, detailed);
    ASSERT_EQ(p.layers.size(), 1u);
    EXPECT_DOUBLE_EQ(p.layers[0].ms_per_step, 3) << detailed << " of " << count;
    ASSERT_EQ(p.ops.size(), 2u);
    EXPECT_DOUBLE_EQ(p.ops[0].ms_per_step, 1) << detailed << " of " << count;
    EXPECT_DOUBLE_EQ(p.ops[1].ms_per_step, 2) << detailed << " of " << count;
  }
}

}  // namespace
}  // namespace torchneck::compare
