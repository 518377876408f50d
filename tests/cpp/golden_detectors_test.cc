// Golden tests of the detectors (as Perfetto's diff tests): each
// tests/golden/detectors/*.json holds a hand-built diagnosis input, the
// findings it must produce (exactly that set of ids, with severities and
// the range the estimated gain must fall in) and how the verdict begins.
// Each file's description gives the arithmetic the expectation rests on.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "analyze/diagnosis.h"

namespace torchneck {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

fs::path golden_dir() { return fs::path(TORCHNECK_SOURCE_DIR) / "tests" / "golden" / "detectors"; }

int64_t ms(const json& v) { return static_cast<int64_t>(v.get<double>() * 1e6); }

DiagnosisInput load_input(const json& j) {
  DiagnosisInput in;
  const json& env = j.at("env");
  in.env.cpu_cores = env.at("cpu_cores");
  in.env.torch_threads = env.at("torch_threads");
  in.env.cuda = env.at("cuda");
  in.env.torch = env.at("torch");
  for (const json& d : env.at("dataloaders")) {
    DataLoaderFacts f;
    f.num_workers = d.at("num_workers");
    in.env.dataloaders.push_back(f);
  }
  for (const json& o : env.at("optimizers")) {
    OptimizerFacts f;
    f.type = o.at("type");
    f.param_tensors = o.at("param_tensors");
    f.foreach = o.at("foreach");
    in.env.optimizers.push_back(f);
  }
  in.main_cpu_fraction = j.at("main_cpu_fraction");
  const json& s = j.at("steps");
  in.steps.source = s.at("source");
  in.steps.steps.resize(s.at("count").get<size_t>());
  in.steps.count = in.steps.steps.size();
  in.steps.excluded = s.at("excluded");
  in.steps.step_ns = ms(s.at("step_ms"));
  in.steps.typical_ns = in.steps.step_ns;
  in.steps.steady_count = in.steps.steps.size() - in.steps.excluded;
  for (int p = 0; p < kNumPhases; ++p)
    in.steps.breakdown.ns[p] = ms(s.at("breakdown_ms").value(phase_name(static_cast<Phase>(p)), 0.0));
  in.steps.ops_per_step = s.at("ops_per_step");
  in.steps.op_self_ns_per_step = s.at("op_self_us_per_step").get<double>() * 1e3;
  if (s.contains("top_level_ops")) {
    const json& t = s.at("top_level_ops");
    in.steps.top_level_ops.per_step = t.at("per_step");
    in.steps.top_level_ops.ns_per_step = t.at("ms_per_step").get<double>() * 1e6;
    in.steps.top_level_ops.small_per_step = t.at("small_per_step");
    in.steps.top_level_ops.small_ns_per_step = t.at("small_ms_per_step").get<double>() * 1e6;
    in.steps.top_level_ops.compute_ns_per_step = t.at("compute_ms_per_step").get<double>() * 1e6;
  }
  for (const json& l : j.at("layers")) {
    LayerStats x;
    x.name = l.at("name");
    x.type = l.at("type");
    x.calls = l.at("calls");
    x.forward_ns = ms(l.at("forward_ms"));
    x.backward_ns = ms(l.at("backward_ms"));
    x.params = l.at("params");
    x.depth = l.at("depth");
    x.leaf = l.at("leaf");
    x.config = l.value("config", "");
    x.output_layer = l.value("output_layer", false);
    in.layers.push_back(x);
  }
  for (const json& d : j.at("data_functions"))
    in.data_functions.push_back({d.at("function"), d.at("file"), d.at("line"), ms(d.at("self_ms"))});
  in.data_python_ns = ms(j.at("data_python_ms"));
  if (j.contains("workers")) {
    for (const json& w : j.at("workers")) {
      ProcessInfo p;
      p.role = ProcessRole::kDataLoaderWorker;
      p.wall_s = w.at("wall_s");
      p.busy_s = w.at("busy_s");
      p.batches = w.at("batches");
      in.workers.push_back(p);
    }
    in.worker_top_function = j.at("worker_top_function");
    in.worker_top_share = j.at("worker_top_share");
  }
  return in;
}

class GoldenDetectors : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenDetectors, ProduceExactlyTheExpectedFindings) {
  std::ifstream f(golden_dir() / GetParam());
  ASSERT_TRUE(f) << GetParam();
  const json golden = json::parse(f);
  const Diagnosis d = diagnose(load_input(golden.at("input")));
  const json& expected = golden.at("expected");

  std::set<std::string> want, got;
  for (const json& e : expected.at("findings")) want.insert(e.at("id"));
  for (const Finding& x : d.findings) got.insert(x.id);
  EXPECT_EQ(got, want) << golden.at("description");

  for (const json& e : expected.at("findings")) {
    const Finding* x = nullptr;
    for (const Finding& c : d.findings)
      if (c.id == e.at("id").get<std::string>()) x = &c;
    if (x == nullptr) continue;
    SCOPED_TRACE(x->id);
    EXPECT_EQ(to_string(x->severity), e.at("severity").get<std::string>());
    EXPECT_FALSE(x->title.empty());
    EXPECT_FALSE(x->evidence.empty());
    EXPECT_FALSE(x->recommendation.empty());
    EXPECT_FALSE(x->gain_arithmetic.empty());
    if (e.at("gain_pct").is_null()) {
      EXPECT_FALSE(x->estimated_gain_pct.has_value());
    } else {
      ASSERT_TRUE(x->estimated_gain_pct.has_value());
      EXPECT_GE(*x->estimated_gain_pct, e.at("gain_pct")[0].get<double>()) << x->gain_arithmetic;
      EXPECT_LE(*x->estimated_gain_pct, e.at("gain_pct")[1].get<double>()) << x->gain_arithmetic;
    }
  }
  const std::string prefix = expected.at("verdict_starts_with");
  EXPECT_EQ(d.verdict.substr(0, prefix.size()), prefix) << d.verdict;
  if (expected.contains("recommendation_contains")) {
    for (const auto& [id, text] : expected.at("recommendation_contains").items()) {
      for (const Finding& x : d.findings) {
        if (x.id == id) {
          EXPECT_NE(x.recommendation.find(text.get<std::string>()), std::string::npos) << x.recommendation;
        }
      }
    }
  }
}

std::vector<std::string> golden_files() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(golden_dir()))
    if (e.path().extension() == ".json") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenDetectors, ::testing::ValuesIn(golden_files()),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.size() - 5);
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(GoldenDetectors, TheGoldenFolderIsNotEmpty) { EXPECT_GE(golden_files().size(), 6u); }

}  // namespace
}  // namespace torchneck
