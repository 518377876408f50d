// core_contention: the loop waits for a CPU and the script's own workers and
// threads outnumber the cores. Workers count only with those alive at the
// same time (peak_alive_workers): a training loader's two and an evaluation
// loader's two made after them are two at once, not four. Inputs are
// hand-built: 2 cores, 1 torch thread, a main thread that waited 30 %.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyze/diagnosis.h"
#include "model/processes.h"

namespace torchneck {
namespace {

constexpr int64_t kSec = 1'000'000'000;

ProcessInfo worker(int64_t id, int64_t start_s, double wall_s) {
  ProcessInfo p;
  p.pid = 100 + id;
  p.role = ProcessRole::kDataLoaderWorker;
  p.worker_id = id;
  p.start_ns = start_s * kSec;
  p.wall_s = wall_s;
  p.cpu_s = wall_s / 2;
  return p;
}

DiagnosisInput contended_with(const std::vector<ProcessInfo>& workers) {
  DiagnosisInput in;
  in.env.cpu_cores = 2;
  in.env.torch_threads = 1;
  DataLoaderFacts loader;
  loader.num_workers = 2;
  in.env.dataloaders = {loader, loader};
  in.main_runqueue_fraction = 0.30;
  in.workers = workers;
  in.workers_alive_at_once = peak_alive_workers(workers);
  return in;
}

const Finding* contention(const DiagnosisInput& in) {
  static std::vector<Finding> fs;
  fs = run_detectors(in, Evidence::kCpu);
  for (const Finding& f : fs)
    if (f.id == "core_contention") return &f;
  return nullptr;
}

TEST(PeakAliveWorkers, CountsOnlyTheWorkersAliveTogether) {
  // GIVEN two training workers (0..10 s) and two evaluation workers made after (10..12 s)
  const std::vector<ProcessInfo> ws = {worker(0, 1, 9), worker(1, 1, 9), worker(2, 11, 1), worker(3, 11, 1)};
  // THEN two at once; with the evaluation loader made while training ran, four
  EXPECT_EQ(peak_alive_workers(ws), 2);
  const std::vector<ProcessInfo> overlapping = {worker(0, 1, 9), worker(1, 1, 9), worker(2, 5, 1), worker(3, 5, 1)};
  EXPECT_EQ(peak_alive_workers(overlapping), 4);
  // AND a worker whose start is unknown counts as alive with every other
  std::vector<ProcessInfo> unknown = ws;
  unknown[3].start_ns = 0;
  EXPECT_EQ(peak_alive_workers(unknown), 3);
}

TEST(CoreContention, AdvisesTheWorkersAliveAtOnceNotEveryWorkerOfTheRun) {
  // GIVEN a training loader's two workers, then an evaluation loader's two
  const DiagnosisInput in = contended_with({worker(0, 1, 9), worker(1, 1, 9), worker(2, 11, 1), worker(3, 11, 1)});
  const Finding* f = contention(in);
  // THEN core_contention, advising 2 workers with 1 thread, and saying 4 lived in all
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->recommendation.find("torch.set_num_threads(1) with 2 workers"), std::string::npos) << f->recommendation;
  bool said = false;
  for (const std::string& e : f->evidence) said = said || e.find("2 DataLoader worker process(es) at once (4 in all") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace torchneck
