// The table of findings (src/analyze/findings.def) and the detector registry
// (src/analyze/detectors/registry.cc) agree: every id a detector emits is in
// the table, every registered detector fires on some input below, every id
// of the table is emitted by some detector, and docs/findings.md is what the
// table generates.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "analyze/diagnosis.h"
#include "analyze/gpu/gpu_report.h"
#include "analyze/cross_rank.h"

namespace torchneck {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMs = 1'000'000;

// A CPU run where most CPU detectors fire: data wait 30 % (input_bound,
// slow_data_transform), optimizer 20 % (optimizer_heavy), one layer of two 90 % of
// forward + backward (heavy_layer), 1000 operators of 5 us per step called
// by the loop itself (framework_overhead).
DiagnosisInput busy_cpu_run() {
  DiagnosisInput in;
  in.env.cpu_cores = 8;
  in.env.torch_threads = 8;
  in.env.dataloaders.push_back({});
  in.steps.source = "dataloader";
  in.steps.steps.resize(10);
  in.steps.step_ns = 100 * kMs;
  in.steps.breakdown.ns[static_cast<int>(Phase::kData)] = 30 * kMs;
  in.steps.breakdown.ns[static_cast<int>(Phase::kOptimizer)] = 20 * kMs;
  in.steps.breakdown.ns[static_cast<int>(Phase::kForward)] = 30 * kMs;
  in.steps.breakdown.ns[static_cast<int>(Phase::kBackward)] = 20 * kMs;
  in.steps.ops_per_step = 1000;
  in.steps.op_self_ns_per_step = 1000 * 5'000.0;
  in.steps.top_level_ops.per_step = 1000;
  in.steps.top_level_ops.ns_per_step = 1000 * 5'000.0;
  in.steps.top_level_ops.small_per_step = 1000;
  in.steps.top_level_ops.small_ns_per_step = 1000 * 5'000.0;
  in.steps.top_level_ops.compute_ns_per_step = 70 * kMs;
  LayerStats model, fc;
  model.name = "";
  model.type = "Net";
  model.forward_ns = 300 * kMs;
  model.backward_ns = 200 * kMs;
  fc.name = "fc";
  fc.type = "Linear";
  fc.depth = 1;
  fc.leaf = true;
  fc.forward_ns = 270 * kMs;
  fc.backward_ns = 180 * kMs;
  fc.calls = 10;
  fc.params = 1000;
  LayerStats conv = fc;
  conv.name = "conv";
  conv.type = "Conv2d";
  conv.forward_ns = 30 * kMs;
  conv.backward_ns = 20 * kMs;
  in.layers = {model, fc, conv};
  in.data_functions.push_back({"augment", "train.py", 40, 200 * kMs});
  in.data_python_ns = 250 * kMs;
  return in;
}

// A CPU-only run, compute-bound on large operators, with 2 of 8 cores used
// by torch (cpu_threads_underused).
DiagnosisInput few_threads_run() {
  DiagnosisInput in;
  in.env.cpu_cores = 8;
  in.env.torch_threads = 2;
  in.steps.steps.resize(10);
  in.steps.step_ns = 100 * kMs;
  in.steps.breakdown.ns[static_cast<int>(Phase::kForward)] = 60 * kMs;
  in.steps.breakdown.ns[static_cast<int>(Phase::kBackward)] = 30 * kMs;
  in.steps.ops_per_step = 100;
  in.steps.op_self_ns_per_step = 100 * 500'000.0;
  return in;
}

// A DataLoader of 2 non-persistent workers whose processes ran 3 times
// (dataloader_respawn).
DiagnosisInput respawning_workers() {
  DiagnosisInput in;
  DataLoaderFacts loader;
  loader.num_workers = 2;
  in.env.dataloaders.push_back(loader);
  in.workers.resize(6);
  return in;
}

// A loop of one torch thread on 2 cores that waited for a CPU 30 % of the
// training loop while other processes took 1.5 cores (busy_machine).
DiagnosisInput crowded_machine() {
  DiagnosisInput in;
  in.env.cpu_cores = 2;
  in.env.torch_threads = 1;
  in.main_runqueue_fraction = 0.30;
  in.other_cores = 1.5;
  return in;
}

// A loop whose steps differ: 30 steps after warm-up getting slower (10 ->
// 19 ms: step_time_drift), every 5th 20 ms longer in a checkpoint save
// (periodic_stall), evaluation passes 30 % of the time (evaluation_heavy),
// and the main thread waiting for a CPU 20 % of the run with 2 workers and
// 2 torch threads on 2 cores (core_contention).
DiagnosisInput troubled_loop() {
  DiagnosisInput in;
  in.env.cpu_cores = 2;
  in.env.torch_threads = 2;
  in.main_runqueue_fraction = 0.20;
  DataLoaderFacts loader;
  loader.num_workers = 2;  // + 2 torch threads on 2 cores
  in.env.dataloaders.push_back(loader);
  StepAnalysis& s = in.steps;
  s.source = "optimizer";
  s.steps.resize(31);
  SlowGroup g;
  g.kind = SlowKind::kPeriodic;
  g.period = 5;
  g.first = 5;
  g.phase = Phase::kOther;
  g.what = "train.py:40(save_checkpoint) -> serialization.py:376(save)";
  for (size_t i = 0; i < s.steps.size(); ++i) {
    Step& st = s.steps[i];
    st.start_ns = i == 0 ? 0 : s.steps[i - 1].end_ns;
    int64_t d = (10 + static_cast<int64_t>(i) * 3 / 10) * kMs;
    st.steady = i > 0;
    if (i > 0 && i % 5 == 0) {
      d += 20 * kMs;
      st.slow = SlowKind::kPeriodic;
      g.steps.push_back(i);
      g.excess_ns += 20 * kMs;
    }
    st.end_ns = st.start_ns + d;
    if (st.steady) s.steady_ns += d;
    s.window_ns += d;
  }
  s.steady_count = 30;
  s.step_ns = s.steady_ns / 30;
  s.typical_ns = 14 * kMs;
  s.breakdown.ns[static_cast<int>(Phase::kForward)] = s.step_ns / 2;
  s.breakdown.ns[static_cast<int>(Phase::kOther)] = s.step_ns - s.step_ns / 2;
  g.share = static_cast<double>(g.excess_ns) / static_cast<double>(s.steady_ns);
  s.slow.push_back(g);
  s.evaluation = {{0, 1}, {2, 3}};
  s.evaluation_ns = s.window_ns * 3 / 10;
  return in;
}

// Resident memory rising 10 MiB a step on a straight line, and garbage
// collections a tenth of the steady steps (memory_creep, gc_pauses).
DiagnosisInput leaking_run() {
  DiagnosisInput in;
  MemoryAnalysis& m = in.memory;
  m.sampled = m.fitted = true;
  m.span = {true, 1, 40, 0, 40 * 100 * kMs};
  m.fit_samples = 40;
  m.fit = {40, 300.0 * (1 << 20), 100.0 * (1 << 20), 0.99};
  m.late_fit = m.fit;
  m.rss_steady_start = int64_t{300} << 20;
  m.growth_bytes = 400.0 * (1 << 20);
  m.growth_per_step_bytes = 10.0 * (1 << 20);
  GcAnalysis& g = in.gc;
  g.observed = true;
  g.span = m.span;
  g.span_ns = 40 * 100 * kMs;
  g.collections = 400;
  g.pause_ns = 400 * kMs;
  g.share = 0.1;
  return in;
}

// A GPU trace's report on which every GPU detector fires.
gpu::GpuReport troubled_gpu() {
  using gpu::TbRole;
  gpu::GpuReport r;
  r.tb.avg_total_ns = 100e6;
  r.tb.avg_ns[static_cast<int>(TbRole::kDataLoader)] = 30e6;  // input_bound
  r.hta.kernel_types.push_back({"COMMUNICATION", 100, 25.0});  // communication_bound
  gpu::TbDeviceMetrics d;
  d.utilization = 0.4;  // gpu_idle, launch_bound
  r.metrics.devices.push_back(d);
  gpu::GpuFacts& g = r.facts;
  g.device_name = "NVIDIA A100-SXM4-40GB";
  g.compute_major = 8;  // no_mixed_precision: no tensor-core kernel
  g.device_memory = int64_t{40} << 30;
  g.peak_reserved = int64_t{39} << 30;  // memory_pressure
  g.span_ns = 1'000'000'000;
  g.kernels = 1000;
  g.short_kernels = 900;  // launch_bound
  g.kernel_ns = 50 * kMs;
  g.median_launch_delay_ns = 10'000;
  gpu::SyncPoint s;  // host_sync: 10 % of the trace
  s.what = "cudaStreamSynchronize";
  s.context = "aten::item";
  s.calls = 100;
  s.total_ns = 100 * kMs;
  g.syncs.push_back(s);
  g.sync_ns = s.total_ns;
  g.pageable_copies = 10;  // pageable_memcpy: 2 % of the trace
  g.pageable_ns = 20 * kMs;
  return r;
}

// Two ranks of 100 ms steps: rank 1 computes 30 ms more and rank 0 waits
// for it (straggler); both waiting 20 ms for each other, the late one
// changing (load_imbalance); both transferring 30 ms (communication_bound).
RankAnalysis two_ranks(double wait0, double wait1, double transfer, double last0) {
  RankAnalysis a;
  a.steps = 20;
  a.matched = 40;
  for (int r = 0; r < 2; ++r) {
    RankSummary s;
    s.rank = r;
    s.steps = 20;
    s.step_ns = 100.0 * kMs;
    s.data_ns = 1.0 * kMs;
    s.wait_ns = (r == 0 ? wait0 : wait1) * kMs;
    s.transfer_ns = transfer * kMs;
    s.compute_ns = s.step_ns - s.data_ns - s.wait_ns - s.transfer_ns;
    s.last_share = r == 0 ? last0 : 1 - last0;
    a.ranks.push_back(s);
  }
  a.typical_wait_ns = (wait0 + wait1) / 2 * kMs;  // every step alike
  return a;
}

// Every registered detector on every input above: detector name -> ids.
std::map<std::string, std::set<std::string>> emitted() {
  const gpu::GpuReport gpu = troubled_gpu();
  std::vector<DiagnosisInput> inputs = {busy_cpu_run(), few_threads_run(), respawning_workers(), troubled_loop(),
                                        crowded_machine(),
                                        leaking_run(),
                                        DiagnosisInput{}};
  inputs.back().gpu = &gpu;
  static const RankAnalysis straggling = two_ranks(30, 0, 2, 0.0);
  static const RankAnalysis uneven = two_ranks(20, 20, 2, 0.5);
  static const RankAnalysis talking = two_ranks(1, 1, 30, 0.5);
  for (const RankAnalysis* ra : {&straggling, &uneven, &talking}) {
    inputs.emplace_back();
    inputs.back().ranks = ra;
  }
  std::map<std::string, std::set<std::string>> out;
  for (const RegisteredDetector& d : detectors()) {
    auto& ids = out[d.name];
    for (const DiagnosisInput& in : inputs) {
      std::vector<Finding> found;
      d.detect(in, found);
      EXPECT_LE(found.size(), 1u) << d.name;
      for (const Finding& f : found) ids.insert(f.id);
    }
  }
  return out;
}

TEST(FindingsTable, NamesAreUniqueAndIdsIndexTheTable) {
  std::set<std::string> names;
  for (size_t i = 0; i < finding_table().size(); ++i) {
    const FindingInfo& f = finding_table()[i];
    EXPECT_EQ(static_cast<size_t>(f.id), i) << f.name;
    EXPECT_TRUE(names.insert(f.name).second) << f.name << " twice";
    EXPECT_EQ(find_finding(f.name), &f);
    EXPECT_STRNE(f.meaning, "");
    EXPECT_STRNE(f.fires_when, "");
    EXPECT_STRNE(f.estimated_gain, "");
  }
  EXPECT_EQ(find_finding("no_such_finding"), nullptr);
  const Finding f = make_finding(FindingId::pageable_memcpy);
  EXPECT_EQ(f.id, "pageable_memcpy");
  EXPECT_EQ(f.severity, finding_info(FindingId::pageable_memcpy).default_severity);
}

TEST(FindingsTable, SeveritiesPrintAsBeforeAndSortHighFirst) {
  EXPECT_STREQ(to_string(Severity::kHigh), "high");
  EXPECT_STREQ(to_string(Severity::kMedium), "medium");
  EXPECT_STREQ(to_string(Severity::kLow), "low");
  EXPECT_LT(Severity::kHigh, Severity::kMedium);
  EXPECT_LT(Severity::kMedium, Severity::kLow);
}

TEST(FindingsTable, EveryDetectorFiresAndEmitsOnlyIdsOfTheTable) {
  std::set<std::string> covered;
  for (const auto& [detector, ids] : emitted()) {
    EXPECT_FALSE(ids.empty()) << detector << " fired on none of the inputs: extend them";
    for (const std::string& id : ids) {
      EXPECT_NE(find_finding(id), nullptr) << detector << " emits '" << id << "', not in findings.def";
      covered.insert(id);
    }
  }
  for (const FindingInfo& f : finding_table())
    EXPECT_EQ(covered.count(f.name), 1u) << f.name << " is in findings.def but no registered detector emits it";
}

TEST(FindingsTable, EachDetectorReadsTheEvidenceItIsRegisteredFor) {
  // The GPU detectors find nothing without a GPU report; the CPU ones
  // nothing on a GPU report alone (an empty CPU side).
  const gpu::GpuReport gpu = troubled_gpu();
  DiagnosisInput gpu_only;
  gpu_only.gpu = &gpu;
  for (const RegisteredDetector& d : detectors()) {
    std::vector<Finding> found;
    if (d.evidence == Evidence::kGpu) {
      d.detect(busy_cpu_run(), found);
      d.detect(few_threads_run(), found);
      d.detect(respawning_workers(), found);
    } else {
      d.detect(gpu_only, found);
    }
    EXPECT_TRUE(found.empty()) << d.name;
  }
}

TEST(FindingsTable, DocsMatchTheTable) {
  const fs::path doc = fs::path(TORCHNECK_SOURCE_DIR) / "docs" / "findings.md";
  const std::string generated = findings_markdown();
  if (const char* w = std::getenv("TORCHNECK_WRITE_DOCS"); w != nullptr && std::string(w) == "1") {
    std::ofstream(doc) << generated;
  }
  std::ifstream f(doc);
  ASSERT_TRUE(f) << doc << " is missing: run this test with TORCHNECK_WRITE_DOCS=1";
  std::stringstream committed;
  committed << f.rdbuf();
  EXPECT_EQ(committed.str(), generated)
      << "docs/findings.md differs from src/analyze/findings.def: run this test with TORCHNECK_WRITE_DOCS=1";
}

}  // namespace
}  // namespace torchneck
