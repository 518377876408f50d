// The run model's device side (model/activity.h), the Kineto trace as a Run
// (ingest/kineto_to_run.h) and the one place where runs are put together
// (model/run_set.h).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "ingest/kineto_json.h"
#include "ingest/kineto_to_run.h"
#include "model/run_set.h"

namespace torchneck {
namespace {

Activity work(ActivityKind k, int64_t device, int64_t stream, int64_t ts, int64_t dur) {
  Activity a;
  a.cat = k;
  a.device = device;
  a.stream = stream;
  a.pid = device;
  a.tid = stream;
  a.ts_ns = ts;
  a.dur_ns = dur;
  return a;
}

TEST(Activities, StreamsIndexTheDeviceWorkOfEachStream) {
  // GIVEN kernels, copies and a memset on two devices, among host activity
  Activities a;
  a.events = {work(ActivityKind::kCpuOp, 7, 7, 0, 500), work(ActivityKind::kKernel, 1, 9, 10, 100),
              work(ActivityKind::kKernel, 0, 7, 20, 30), work(ActivityKind::kMemcpy, 0, 7, 60, 5),
              work(ActivityKind::kRuntime, 7, 7, 5, 5), work(ActivityKind::kMemset, 0, 13, 70, 2),
              work(ActivityKind::kKernel, 0, 7, 80, 40)};
  // WHEN indexed
  index_streams(a);
  // THEN one entry per (device, stream) with device work, in order, host activity left out
  ASSERT_EQ(a.streams.size(), 3u);
  EXPECT_EQ(a.streams[0].device, 0);
  EXPECT_EQ(a.streams[0].stream, 7);
  EXPECT_EQ(a.streams[0].kernels, 2u);
  EXPECT_EQ(a.streams[0].memcpys, 1u);
  EXPECT_EQ(a.streams[0].busy_ns, 30 + 5 + 40);
  EXPECT_EQ(a.streams[1].stream, 13);
  EXPECT_EQ(a.streams[1].memsets, 1u);
  EXPECT_EQ(a.streams[2].device, 1);
  EXPECT_EQ(a.streams[2].busy_ns, 100);
}

const char* kTrace = R"({
  "distributedInfo": {"rank": 3, "world_size": 8, "backend": "nccl"},
  "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10, "dur": 50},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 20, "dur": 5, "args": {"correlation": 4}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 30, "dur": 20, "args": {"device": 0, "stream": 7, "correlation": 4}},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": 12, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 64, "Total Allocated": 1064, "Total Reserved": 2048}},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": 40, "args": {"Device Type": 1, "Device Id": 0, "Bytes": -64, "Total Allocated": 1000, "Total Reserved": 2048}},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": 41, "args": {"Device Type": 0, "Device Id": -1, "Bytes": 8}}
  ]})";

TEST(KinetoToRun, TheTraceMovesIntoTheRunAndTheCpuSideLeavesItAlone) {
  // GIVEN a trace of rank 3 of 8 with one launch, its kernel and device memory events
  kineto::Trace t = kineto::parse_trace(kTrace, "hand.json");
  const size_t events = t.events.size();
  // WHEN it becomes a Run
  torchneck::Run run = run_of_trace(std::move(t));
  // THEN the activities, the rank, the streams and a memory counter are the Run's
  EXPECT_EQ(run.activities.source, "hand.json");
  EXPECT_EQ(run.activities.events.size(), events);
  EXPECT_EQ(run.rank.rank, 3);
  EXPECT_EQ(run.rank.world_size, 8);
  EXPECT_EQ(run.rank.backend, "nccl");
  ASSERT_EQ(run.activities.streams.size(), 1u);
  EXPECT_EQ(run.activities.streams[0].kernels, 1u);
  EXPECT_TRUE(run.env.cuda);
  ASSERT_EQ(run.activities.counters.size(), 1u);  // the CPU memory event is not a device's
  const CounterSeries& c = run.activities.counters[0];
  EXPECT_EQ(c.device, 0);
  ASSERT_EQ(c.samples.size(), 2u);
  EXPECT_EQ(c.samples[0].t_ns, 12'000);
  EXPECT_EQ(c.samples[0].value, 1064);
  EXPECT_EQ(c.samples[1].t_ns, 40'000);
  EXPECT_EQ(c.samples[1].value, 1000);
  // AND no CPU side until it is added, which leaves the activities as they were
  EXPECT_TRUE(run.ops.empty());
  add_cpu_side(run);
  ASSERT_EQ(run.ops.size(), 1u);
  EXPECT_EQ(run.ops[0].name, "aten::mm");
  EXPECT_EQ(run.activities.events.size(), events);
}

TEST(KinetoToRun, WithoutTotalsTheCounterIsTheRunningSum) {
  const char* text = R"({"traceEvents": [
    {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1, "args": {"Device Type": 1, "Device Id": 1, "Bytes": 100}},
    {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Device Type": 1, "Device Id": 1, "Bytes": 50}},
    {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 3, "args": {"Device Type": 1, "Device Id": 1, "Bytes": -120}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]})";
  const torchneck::Run run = run_from_trace(kineto::parse_trace(text, "sum.json"));
  ASSERT_EQ(run.activities.counters.size(), 1u);
  std::vector<int64_t> values;
  for (const auto& s : run.activities.counters[0].samples) values.push_back(s.value);
  EXPECT_EQ(values, (std::vector<int64_t>{100, 150, 30}));
  EXPECT_FALSE(run.env.cuda);  // memory events alone are no device work
}

Run ranked(int64_t rank, int64_t world, const std::string& name) {
  Run r;
  r.rank.rank = rank;
  r.rank.world_size = world;
  r.run.script = name;
  return r;
}

TEST(RunSet, RanksAreOrderedAndTheLowestIsPrimary) {
  std::vector<torchneck::Run> runs;
  runs.push_back(ranked(2, 4, "c"));
  runs.push_back(ranked(0, 4, "a"));
  runs.push_back(ranked(1, 4, "b"));
  const RunSet set = merge_ranks(std::move(runs));
  ASSERT_EQ(set.runs.size(), 3u);
  EXPECT_EQ(set.runs[0].run.script, "a");
  EXPECT_EQ(set.runs[2].run.script, "c");
  EXPECT_EQ(set.primary().rank.rank, 0);
  EXPECT_TRUE(set.notes.empty());
}

TEST(RunSet, DuplicateRanksAndDisagreeingWorldSizesAreNoted) {
  std::vector<torchneck::Run> runs;
  runs.push_back(ranked(1, 2, "first"));
  runs.push_back(ranked(1, 2, "second"));
  runs.push_back(ranked(0, 8, "other job"));
  const RunSet set = merge_ranks(std::move(runs));
  ASSERT_EQ(set.notes.size(), 2u);
  EXPECT_NE(set.notes[0].find("rank 1 appears in 2 traces"), std::string::npos) << set.notes[0];
  EXPECT_NE(set.notes[1].find("different world sizes (2, 8)"), std::string::npos) << set.notes[1];
  // the two traces of rank 1 keep their given order
  EXPECT_EQ(set.runs[1].run.script, "first");
  EXPECT_EQ(set.runs[2].run.script, "second");
}

TEST(RunSet, NothingToMergeIsAnError) { EXPECT_THROW(merge_ranks({}), std::invalid_argument); }

}  // namespace
}  // namespace torchneck
