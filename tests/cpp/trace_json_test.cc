// trace.json on hand-built runs whose timeline is known by construction:
// the exact slices, phases, flows and window, parsed back as JSON and
// checked with a structure validator written here (not the writer's code).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "analyze/analysis.h"
#include "ingest/kineto_to_run.h"
#include "report/trace_json.h"

namespace torchneck {
namespace {

using nlohmann::json;

struct RunBuilder {
  torchneck::Run run;
  RunBuilder() {
    run.run.script = "train.py";
    run.threads.push_back(ThreadInfo{42, "MainThread"});
  }
  uint32_t name(const std::string& s) {
    for (uint32_t i = 0; i < run.strings.size(); ++i)
      if (run.strings[i] == s) return i;
    run.strings.push_back(s);
    return static_cast<uint32_t>(run.strings.size() - 1);
  }
  void event(const std::string& n, OpKind kind, int64_t start, int64_t end, int64_t seq = -1) {
    OpEvent e{};
    e.start_ns = start;
    e.end_ns = end;
    e.seq_nr = seq;
    e.forward_tid = 1;
    e.name_id = name(n);
    e.kind = kind;
    run.timeline.push_back(e);
  }
  // `iterations` steps of 1000 ns: data [t, t+400), aten::mm [t+400, t+500)
  // with sequence number i, its backward node [t+500, t+700), optimizer [t+700, t+800).
  void iterations(int n) {
    for (int i = 0; i < n; ++i) {
      const int64_t t = i * 1000;
      event("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", OpKind::kUserScope, t, t + 400);
      event("aten::mm", OpKind::kOperator, t + 400, t + 500, i);
      event("MmBackward0", OpKind::kBackward, t + 500, t + 700, i);
      event("Optimizer.step#SGD.step", OpKind::kUserScope, t + 700, t + 800);
    }
  }
};

json write(const torchneck::Run& run, TraceJsonOptions o = TraceJsonOptions{}) {
  const Analysis a = analyze(run, SummaryOptions{});
  return json::parse(trace_json(run, a, o));
}

int64_t ns(const json& v) { return static_cast<int64_t>(std::llround(v.get<double>() * 1000)); }

// The Trace Event Format's rules as trace.json promises them.
void validate(const json& doc) {
  ASSERT_TRUE(doc.contains("traceEvents"));
  ASSERT_TRUE(doc["otherData"].contains("left_out"));
  std::set<int64_t> pnames;
  std::set<std::pair<int64_t, int64_t>> tnames, used;
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> tracks;
  std::map<uint64_t, std::vector<json>> flows;
  for (const json& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    ASSERT_TRUE(ph == "X" || ph == "M" || ph == "s" || ph == "f" || ph == "i" || ph == "C") << e;
    const auto key = std::make_pair(e["pid"].get<int64_t>(), e["tid"].get<int64_t>());
    if (ph == "M") {
      if (e["name"] == "process_name") pnames.insert(key.first);
      if (e["name"] == "thread_name") tnames.insert(key);
      continue;
    }
    used.insert(key);
    ASSERT_GE(e["ts"].get<double>(), 0);
    if (ph == "X") {
      ASSERT_GE(e["dur"].get<double>(), 0);
      tracks[key].emplace_back(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]));
    } else if (ph == "s" || ph == "f") {
      EXPECT_EQ(e["bp"], "e");
      flows[e["id"].get<uint64_t>()].push_back(e);
    }
  }
  for (const auto& k : used) {
    EXPECT_TRUE(tnames.count(k)) << k.first << "/" << k.second;
    EXPECT_TRUE(pnames.count(k.first)) << k.first;
  }
  for (auto& [key, spans] : tracks) {
    std::sort(spans.begin(), spans.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<int64_t> ends;
    for (const auto& [s, e] : spans) {
      while (!ends.empty() && ends.back() <= s) ends.pop_back();
      ASSERT_TRUE(ends.empty() || e <= ends.back()) << "partial overlap on " << key.second << " at " << s;
      ends.push_back(e);
    }
  }
  for (const auto& [id, pair] : flows) {
    ASSERT_EQ(pair.size(), 2u) << id;
    EXPECT_NE(pair[0]["ph"], pair[1]["ph"]);
    EXPECT_EQ(pair[0]["cat"], pair[1]["cat"]);
    for (const json& p : pair) {
      const int64_t t = ns(p["ts"]);
      const auto& spans = tracks[{p["pid"].get<int64_t>(), p["tid"].get<int64_t>()}];
      EXPECT_TRUE(std::any_of(spans.begin(), spans.end(), [&](auto& s) { return s.first <= t && t <= s.second; })) << p;
    }
  }
}

std::vector<json> of(const json& doc, const std::string& cat) {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == cat) out.push_back(e);
  return out;
}

TEST(TraceJson, StepsPhasesOperatorsAndForwardBackwardFlows) {
  // GIVEN 4 iterations with known data / forward / backward / optimizer spans
  RunBuilder rb;
  rb.iterations(4);
  TraceJsonOptions o;
  o.steps = 0;  // every step
  // WHEN written
  const json doc = write(rb.run, o);
  validate(doc);
  // THEN 4 steps; step 1 (after step 0's optimizer, at 800) has its phases exactly
  const auto steps = of(doc, "step");
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[0]["name"], "step 0 (warm-up)");
  EXPECT_EQ(ns(steps[1]["ts"]), 800);
  EXPECT_EQ(ns(steps[1]["dur"]), 1000);
  std::map<std::string, std::pair<int64_t, int64_t>> phases;
  for (const json& p : of(doc, "phase"))
    if (p["args"]["step"] == 1) phases[p["name"]] = {ns(p["ts"]), ns(p["ts"]) + ns(p["dur"])};
  EXPECT_EQ(phases.size(), 4u);
  EXPECT_EQ(phases["data wait"], std::make_pair(int64_t{1000}, int64_t{1400}));
  EXPECT_EQ(phases["forward"], std::make_pair(int64_t{1400}, int64_t{1500}));
  EXPECT_EQ(phases["backward"], std::make_pair(int64_t{1500}, int64_t{1700}));
  EXPECT_EQ(phases["optimizer"], std::make_pair(int64_t{1700}, int64_t{1800}));
  // AND the operators on thread 42 with their sequence numbers
  const auto mm = of(doc, "operator");
  ASSERT_EQ(mm.size(), 4u);
  EXPECT_EQ(mm[2]["tid"], 42);
  EXPECT_EQ(mm[2]["args"]["seq_nr"], 2);
  EXPECT_EQ(of(doc, "backward").size(), 4u);
  EXPECT_EQ(of(doc, "user_scope").size(), 8u);
  // AND one flow per backward node, from its mm (midpoint t+450) to it (t+600)
  std::map<uint64_t, std::map<std::string, int64_t>> flows;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "s" || e["ph"] == "f") flows[e["id"].get<uint64_t>()][e["ph"]] = ns(e["ts"]);
  ASSERT_EQ(flows.size(), 4u);
  std::set<std::pair<int64_t, int64_t>> ends;
  for (auto& [id, f] : flows) ends.insert({f["s"], f["f"]});
  EXPECT_EQ(ends, (std::set<std::pair<int64_t, int64_t>>{{450, 600}, {1450, 1600}, {2450, 2600}, {3450, 3600}}));
  // AND the tracks are named
  EXPECT_EQ(doc["otherData"]["window"]["limited"], false);
}

TEST(TraceJson, WindowKeepsTheFirstStepsAndSaysWhatItLeftOut) {
  // GIVEN 10 equal iterations; WHEN the window is 2 steady steps
  RunBuilder rb;
  rb.iterations(10);
  TraceJsonOptions o;
  o.steps = 2;
  const json doc = write(rb.run, o);
  validate(doc);
  // THEN the warm-up step and the 2 steady ones after it, and the events of iterations 0-2
  EXPECT_EQ(of(doc, "step").size(), 3u);
  EXPECT_EQ(of(doc, "operator").size(), 3u);
  EXPECT_EQ(of(doc, "backward").size(), 3u);
  const json& other = doc["otherData"];
  EXPECT_EQ(other["window"]["steps_in_window"], 3);
  EXPECT_EQ(other["window"]["steps_in_run"], 10);
  EXPECT_EQ(other["left_out"]["outside_step_window"]["operator"], 7);
  EXPECT_EQ(other["left_out"]["outside_step_window"]["backward"], 7);
  EXPECT_EQ(other["left_out"]["outside_step_window"]["user_scope"], 14);
  // AND a marker at the window's end (step 2 ends at 2800)
  int markers = 0;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "i") {
      ++markers;
      EXPECT_EQ(ns(e["ts"]), 2800);
    }
  EXPECT_EQ(markers, 1);
}

TEST(TraceJson, PartialOverlapOnAThreadIsClampedToTheParent) {
  // GIVEN A [0,100) and B [50,150) on one thread (clock skew between collectors)
  RunBuilder rb;
  rb.event("A", OpKind::kUserScope, 0, 100);
  rb.event("B", OpKind::kOperator, 50, 150);
  const json doc = write(rb.run);
  validate(doc);
  // THEN B ends with A and says so
  const auto b = of(doc, "operator");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(ns(b[0]["ts"]) + ns(b[0]["dur"]), 100);
  EXPECT_EQ(b[0]["args"]["clamped"], true);
  EXPECT_EQ(doc["otherData"]["left_out"]["slices_clamped_to_their_parent"], 1);
}

TEST(TraceJson, SlicesCollectedOutOfOrderAreSortedBeforeTheyNest) {
  // GIVEN one thread's slices collected in no order: C [300,400) holds
  // D [320,380), A [0,100) partly overlaps B [50,150), and E [600,700)
  // comes first (the sort moves four of the five, in two cycles: E and A
  // trade places, C and B)
  RunBuilder rb;
  rb.event("E", OpKind::kUserScope, 600, 700);
  rb.event("C", OpKind::kUserScope, 300, 400);
  rb.event("B", OpKind::kOperator, 50, 150);
  rb.event("D", OpKind::kOperator, 320, 380);
  rb.event("A", OpKind::kUserScope, 0, 100);
  const json doc = write(rb.run);
  validate(doc);
  // THEN B is clamped to A, its parent once sorted; D stays whole inside C;
  // and the thread's slices are written in time order
  std::map<std::string, std::pair<int64_t, int64_t>> at;
  std::vector<int64_t> starts;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || (e["cat"] != "operator" && e["cat"] != "user_scope")) continue;
    at[e["name"]] = {ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])};
    starts.push_back(ns(e["ts"]));
  }
  ASSERT_EQ(at.size(), 5u);
  EXPECT_EQ(at["B"].second, 100);
  EXPECT_EQ(at["D"].second - at["D"].first, 60);
  EXPECT_EQ(at["E"].second - at["E"].first, 100);
  EXPECT_TRUE(std::is_sorted(starts.begin(), starts.end()));
  EXPECT_EQ(doc["otherData"]["left_out"]["slices_clamped_to_their_parent"], 1);
}

TEST(TraceJson, HostileNamesStayValidJsonAndNeverCloseAScriptTag) {
  // GIVEN a module class named like markup and a script path with </script>
  RunBuilder rb;
  rb.run.run.script = "dir/</script><script>alert(1)</script>.py";
  rb.run.modules.push_back(ModuleInfo{"evil", "<img src=x onerror=alert(1)>", 10, -1});
  rb.run.module_events.push_back(ModuleEvent{0, 0, 0, 0, {}});
  rb.run.module_events.push_back(ModuleEvent{100, 0, 0, 1, {}});
  rb.event("aten::\"quoted\"\\\n", OpKind::kOperator, 10, 20);
  const Analysis a = analyze(rb.run, SummaryOptions{});
  const std::string text = trace_json(rb.run, a, TraceJsonOptions{});
  // THEN no raw markup and the names survive the round trip
  EXPECT_EQ(text.find("</script>"), std::string::npos);
  EXPECT_EQ(text.find("<img"), std::string::npos);
  const json doc = json::parse(text);
  validate(doc);
  EXPECT_EQ(of(doc, "module").at(0)["name"], "evil (<img src=x onerror=alert(1)>)");
  EXPECT_EQ(of(doc, "operator").at(0)["name"], "aten::\"quoted\"\\\n");
  EXPECT_EQ(doc["otherData"]["script"], rb.run.run.script);
}

RunBuilder python_run() {
  RunBuilder rb;
  for (const char* f : {"main", "train", "step", "loss"}) {
    PyFunctionStats s;
    s.function = f;
    s.file = "train.py";
    s.line = 1;
    rb.run.python.push_back(s);
  }
  return rb;
}

TEST(TraceJson, SamplesBecomeAFlameChartOverTime) {
  // GIVEN samples every 10 ns: [main,train,step] x2, [main,train,loss] x2, then
  // after a gap one more [main,train,step]
  RunBuilder rb = python_run();
  rb.run.stacks.push_back(SampledStack{0, {0, 1, 2}, 3, 0});
  rb.run.stacks.push_back(SampledStack{0, {0, 1, 3}, 2, 0});
  for (auto [t, s] : std::vector<std::pair<int64_t, uint32_t>>{{0, 0}, {10, 0}, {20, 1}, {30, 1}, {1000, 0}})
    rb.run.samples.push_back(PySample{t, 0, s});
  const json doc = write(rb.run);
  validate(doc);
  // THEN shared frames are one slice; each sample lasts until the next, at
  // most twice the usual 10 ns; the gap splits the chart
  std::multiset<std::tuple<std::string, int64_t, int64_t, int64_t>> got;
  for (const json& e : of(doc, "python_sampled"))
    got.insert({e["name"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["args"]["samples"]});
  const std::multiset<std::tuple<std::string, int64_t, int64_t, int64_t>> want = {
      {"main", 0, 50, 4}, {"train", 0, 50, 4}, {"step", 0, 20, 2}, {"loss", 20, 50, 2},
      {"main", 1000, 1010, 1}, {"train", 1000, 1010, 1}, {"step", 1000, 1010, 1}};
  EXPECT_EQ(got, want);
}

TEST(TraceJson, TracedPythonFramesOnTheirOwnTrackAndFirstToGoUnderTheCap) {
  // GIVEN two traced calls and two operators
  RunBuilder rb = python_run();
  rb.run.py_frames.push_back(PyFrameEvent{0, 100, 0, 0, 0});
  rb.run.py_frames.push_back(PyFrameEvent{10, 50, 2, 0, 1});
  rb.event("aten::mm", OpKind::kOperator, 20, 30);
  rb.event("aten::add", OpKind::kOperator, 60, 70);
  const json all = write(rb.run);
  validate(all);
  const auto py = of(all, "python");
  ASSERT_EQ(py.size(), 2u);
  EXPECT_EQ(py[0]["name"], "main");
  EXPECT_EQ(py[1]["name"], "step");
  EXPECT_NE(py[0]["tid"], 42);
  bool named = false;
  for (const json& e : all["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == py[0]["tid"])
      named = e["args"]["name"] == "MainThread Python (traced calls)";
  EXPECT_TRUE(named);
  // WHEN one slice fewer than all may be written
  size_t slices = 0;
  for (const json& e : all["traceEvents"]) slices += e["ph"] == "X";
  TraceJsonOptions o;
  o.max_events = slices - 1;
  const json capped = write(rb.run, o);
  validate(capped);
  // THEN the operators stay, the inner Python frame goes, and it is counted
  EXPECT_EQ(of(capped, "operator").size(), 2u);
  EXPECT_EQ(of(capped, "python").size(), 1u);
  EXPECT_EQ(capped["otherData"]["left_out"]["over_max_events"]["python"], 1);
}

TEST(TraceJson, KinetoGpuStreamsAndLaunchFlows) {
  // GIVEN a trace: a cpu_op on (10, 20) launching a kernel on GPU 0 stream 7
  kineto::Trace t;
  t.names = {"aten::conv2d", "cudaLaunchKernel", "implicit_gemm<128>", "Memcpy HtoD"};
  auto ev = [&](kineto::Cat cat, uint32_t name, int64_t ts, int64_t dur, int64_t pid, int64_t tid) {
    kineto::Event e;
    e.cat = cat;
    e.name = name;
    e.ts_ns = ts;
    e.dur_ns = dur;
    e.pid = pid;
    e.tid = tid;
    t.events.push_back(e);
    return &t.events.back();
  };
  ev(kineto::Cat::kCpuOp, 0, 0, 1000, 10, 20);
  ev(kineto::Cat::kRuntime, 1, 100, 100, 10, 20)->correlation = 7;
  auto* k = ev(kineto::Cat::kKernel, 2, 300, 200, 0, 7);
  k->device = 0;
  k->stream = 7;
  k->correlation = 7;
  k->grid[0] = 4;
  k->block[0] = 128;
  auto* m = ev(kineto::Cat::kMemcpy, 3, 600, 100, 0, 7);
  m->device = 0;
  m->stream = 7;
  m->bytes = 4096;
  t.devices.push_back(kineto::Device{0, "Tesla V100"});
  // (the Run holds the trace's activities: trace.json reads them from it)
  const torchneck::Run run = run_from_trace(std::move(t));
  TraceJsonOptions o;
  const json doc = write(run, o);
  validate(doc);
  // THEN the kernel and memcpy on the GPU's stream track, with their args
  const auto kernels = of(doc, "kernel");
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0]["tid"], 7);
  EXPECT_EQ(kernels[0]["args"]["grid"], "[4, 0, 0]");
  EXPECT_EQ(kernels[0]["args"]["block"], "[128, 0, 0]");
  EXPECT_EQ(of(doc, "gpu_memcpy").at(0)["args"]["bytes"], 4096);
  const auto rt = of(doc, "cuda_runtime");
  ASSERT_EQ(rt.size(), 1u);
  EXPECT_EQ(rt[0]["pid"], 10);
  EXPECT_EQ(rt[0]["tid"], 20);
  // AND one launch flow from the runtime call to the kernel
  std::vector<json> flow;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "s" || e["ph"] == "f") flow.push_back(e);
  ASSERT_EQ(flow.size(), 2u);
  EXPECT_EQ(flow[0]["cat"], "ac2g");
  EXPECT_EQ(flow[0]["tid"], 20);
  EXPECT_EQ(flow[1]["pid"], kernels[0]["pid"]);
  // AND the GPU process is named after its device
  bool named = false;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == kernels[0]["pid"])
      named = e["args"]["name"] == "GPU 0: Tesla V100";
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace torchneck

namespace torchneck {
namespace {

TEST(TraceJson, ProcessesAreNamedWorkersIncluded) {
  // GIVEN a run with its main process and two DataLoader worker processes
  RunBuilder rb;
  rb.event("aten::mm", OpKind::kOperator, 0, 10);
  ProcessInfo main;
  main.pid = 4000;
  main.role = ProcessRole::kMain;
  rb.run.processes.push_back(main);
  for (int w = 0; w < 2; ++w) {
    ProcessInfo p;
    p.pid = 4001 + w;
    p.role = ProcessRole::kDataLoaderWorker;
    p.worker_id = w;
    p.start_method = "fork";
    rb.run.processes.push_back(p);
  }
  const json doc = write(rb.run);
  validate(doc);
  // THEN the main process carries the events under its pid, and every process is named
  std::map<int64_t, std::string> names;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
  EXPECT_EQ(of(doc, "operator").at(0)["pid"], 4000);
  EXPECT_EQ(names[4000], "python train.py (main)");
  EXPECT_EQ(names[4001], "DataLoader worker 0 (pid 4001, fork)");
  EXPECT_EQ(names[4002], "DataLoader worker 1 (pid 4002, fork)");
}

}  // namespace
}  // namespace torchneck
