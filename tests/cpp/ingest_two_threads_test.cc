// The events array read on two threads (kineto_json.cc events_in_two) must
// give exactly what one pass gives: every field of every event and flow,
// names and their ids, string ids ("Spans"), metadata, [memory] peaks, on
// every fixture; and on damaged text the same error message (the two-thread
// reading gives up and the one pass reports). Forced on small inputs by
// lowering the thresholds (the scan's in two parts too).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ingest/kineto_json.h"
#include "ingest/trace_file.h"

namespace torchneck::kineto {
namespace {

namespace fs = std::filesystem;

struct Threshold {  // both the events' and the scan's; restores the defaults
  size_t old_events, old_bytes;
  explicit Threshold(size_t n)
      : old_events(detail::set_parallel_min_events(n)), old_bytes(detail::set_parallel_min_bytes(n == SIZE_MAX ? SIZE_MAX : 0)) {}
  ~Threshold() {
    detail::set_parallel_min_events(old_events);
    detail::set_parallel_min_bytes(old_bytes);
  }
};

void expect_same(const Trace& a, const Trace& b, const std::string& what) {
  ASSERT_EQ(a.events.size(), b.events.size()) << what;
  for (size_t i = 0; i < a.events.size(); ++i) {
    const Event &x = a.events[i], &y = b.events[i];
    const bool same = x.ts_ns == y.ts_ns && x.dur_ns == y.dur_ns && x.cat == y.cat && x.name == y.name && x.pid == y.pid &&
                      x.tid == y.tid && x.device == y.device && x.stream == y.stream && x.correlation == y.correlation &&
                      x.external_id == y.external_id && x.seq_nr == y.seq_nr && x.fwd_tid == y.fwd_tid &&
                      std::memcmp(x.grid, y.grid, sizeof x.grid) == 0 && std::memcmp(x.block, y.block, sizeof x.block) == 0 &&
                      x.registers_per_thread == y.registers_per_thread && x.shared_memory == y.shared_memory &&
                      x.blocks_per_sm == y.blocks_per_sm && x.warps_per_sm == y.warps_per_sm &&
                      x.est_occupancy == y.est_occupancy && x.bytes == y.bytes;
    ASSERT_TRUE(same) << what << " event " << i;
  }
  ASSERT_EQ(a.flows.size(), b.flows.size()) << what;
  for (size_t i = 0; i < a.flows.size(); ++i) {
    const Flow &x = a.flows[i], &y = b.flows[i];
    ASSERT_TRUE(x.id == y.id && x.start == y.start && x.cat == y.cat && x.ts_ns == y.ts_ns && x.pid == y.pid && x.tid == y.tid)
        << what << " flow " << i;
  }
  ASSERT_EQ(a.names, b.names) << what;
  ASSERT_EQ(a.process_names, b.process_names) << what;
  ASSERT_EQ(a.thread_names, b.thread_names) << what;
  ASSERT_EQ(a.device_memory.size(), b.device_memory.size()) << what;
  for (const auto& [dev, m] : a.device_memory) {
    const MemoryUse& n = b.device_memory.at(dev);
    ASSERT_TRUE(m.events == n.events && m.has_totals == n.has_totals && m.peak_allocated == n.peak_allocated &&
                m.peak_reserved == n.peak_reserved && m.running == n.running)
        << what << " device " << dev;
  }
  ASSERT_EQ(a.counters.size(), b.counters.size()) << what;
  for (size_t i = 0; i < a.counters.size(); ++i) {
    const CounterSeries &x = a.counters[i], &y = b.counters[i];
    ASSERT_TRUE(x.name == y.name && x.device == y.device && x.samples.size() == y.samples.size()) << what << " counter " << i;
    for (size_t j = 0; j < x.samples.size(); ++j)
      ASSERT_TRUE(x.samples[j].t_ns == y.samples[j].t_ns && x.samples[j].value == y.samples[j].value)
          << what << " counter " << i << " sample " << j;
  }
  ASSERT_EQ(a.devices.size(), b.devices.size()) << what;
  ASSERT_EQ(a.rank.rank, b.rank.rank) << what;
  ASSERT_EQ(a.rank.world_size, b.rank.world_size) << what;
  ASSERT_EQ(a.rank.backend, b.rank.backend) << what;
}

std::string outcome(const std::string& text, size_t threshold, Trace* out) {
  Threshold th(threshold);
  try {
    *out = parse_trace(text, "t.json");
    return "ok";
  } catch (const std::runtime_error& e) {
    return e.what();
  }
}

std::vector<std::string> fixture_texts() {
  std::vector<std::string> out;
  const fs::path dir = fs::path(TORCHNECK_SOURCE_DIR) / ".." / "shared" / "fixtures" / "kineto";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().find(".trace.json") == std::string::npos) continue;
    const BigBytes t = detail::read_trace_file(e.path().string());
    out.emplace_back(t.data(), t.size());
  }
  return out;
}

TEST(IngestTwoThreads, SameTraceAsOnePassOnEveryFixture) {
  const auto texts = fixture_texts();
  ASSERT_GE(texts.size(), 10u) << "fixtures not found";
  for (size_t i = 0; i < texts.size(); ++i) {
    Trace one, two;
    ASSERT_EQ(outcome(texts[i], SIZE_MAX, &one), "ok");
    ASSERT_EQ(outcome(texts[i], 2, &two), "ok");
    expect_same(one, two, "fixture " + std::to_string(i));
  }
}

TEST(IngestTwoThreads, StringIdsMemoryAndMetadataAcrossTheCut) {
  // Names as pids on both sides of the middle, one first seen after it;
  // [memory] running sums and thread names that depend on the order.
  const std::string text = R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "a", "pid": "Spans", "tid": 1, "ts": 1, "dur": 2},
    {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 100}},
    {"ph": "M", "name": "thread_name", "pid": "Spans", "tid": 1, "args": {"name": "first"}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 3, "dur": 4, "args": {"correlation": 5}},
    {"ph": "X", "cat": "cpu_op", "name": "b", "pid": "Traces", "tid": 1, "ts": 4, "dur": 1},
    {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5, "args": {"Device Type": 1, "Device Id": 0, "Bytes": -60}},
    {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 6, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 200}},
    {"ph": "M", "name": "thread_name", "pid": "Spans", "tid": 1, "args": {"name": "second"}},
    {"ph": "M", "name": "process_name", "pid": "Traces", "args": {"name": "p"}},
    {"ph": "s", "cat": "ac2g", "id": "Spans", "pid": "Traces", "tid": 2, "ts": 7},
    {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": "Other", "ts": 8, "dur": 1}
  ]})";
  for (size_t threshold : {size_t{2}, SIZE_MAX}) {
    Trace one, two;
    ASSERT_EQ(outcome(text, SIZE_MAX, &one), "ok");
    ASSERT_EQ(outcome(text, threshold, &two), "ok");
    expect_same(one, two, "handwritten");
  }
  // A digit string in the range of the second half's temporary ids: the
  // two-thread reading gives up, the one pass reads it.
  std::string odd = text;
  odd.replace(odd.rfind("\"Other\""), 7, "\"-9223372036854775807\"");
  Trace one, two;
  ASSERT_EQ(outcome(odd, SIZE_MAX, &one), "ok");
  ASSERT_EQ(outcome(odd, 2, &two), "ok");
  expect_same(one, two, "odd id");
}

TEST(IngestTwoThreads, SameErrorAsOnePassOnDamagedText) {
  auto texts = fixture_texts();
  std::sort(texts.begin(), texts.end(), [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  texts.resize(std::min<size_t>(texts.size(), 5));
  std::mt19937 rng(5);
  const char planted[] = {'"', '\\', '{', '}', '[', ']', ',', ':', '0', '-', 'x'};
  for (const std::string& base : texts) {
    for (int round = 0; round < 60; ++round) {
      std::string t = base;
      const size_t at = rng() % t.size();
      if (rng() % 2) t[at] = planted[rng() % sizeof planted];
      else t.erase(at, 1 + rng() % 8);
      Trace one, two;
      const std::string a = outcome(t, SIZE_MAX, &one), b = outcome(t, 2, &two);
      ASSERT_EQ(a, b) << "variant " << round;
      if (a == "ok") expect_same(one, two, "variant " + std::to_string(round));
    }
  }
}

}  // namespace
}  // namespace torchneck::kineto
