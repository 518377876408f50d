// The flame tree: every sampled nanosecond lands on exactly one path, and the
// JSON for report.html keeps the heaviest nodes and says how many it left out.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <sstream>

#include "analyze/flame.h"
#include "report/flame_files.h"
#include "report/flame_json.h"

namespace torchneck {
namespace {

PyFunctionStats fn(const char* name, const char* file, int line) {
  PyFunctionStats f;
  f.function = name;
  f.file = file;
  f.line = line;
  return f;
}

Run two_paths() {
  torchneck::Run r;
  r.threads = {{1, "MainThread"}};
  r.python = {fn("<module>", "train.py", 1), fn("step", "train.py", 10), fn("forward", "model.py", 5),
              fn("load", "data.py", 3)};
  r.stacks.push_back({0, {0, 1, 2}, 30, 300});
  r.stacks.push_back({0, {0, 1}, 10, 100});
  r.stacks.push_back({0, {0, 3}, 5, 50});
  return r;
}

TEST(Flame, EveryStackIsOnePathAndTotalsAdd) {
  const FlameNode root = build_flame(two_paths());
  EXPECT_EQ(root.total_ns, 450);
  ASSERT_EQ(root.children.size(), 1u);
  const FlameNode& mod = root.children[0];
  EXPECT_EQ(mod.name, "<module>");
  EXPECT_EQ(mod.total_ns, 450);
  ASSERT_EQ(mod.children.size(), 2u);
  EXPECT_EQ(mod.children[0].name, "step");  // heaviest first
  EXPECT_EQ(mod.children[0].total_ns, 400);
  EXPECT_EQ(mod.children[0].self_ns, 100);
  EXPECT_EQ(mod.children[0].children.at(0).name, "forward");
  EXPECT_EQ(mod.children[1].total_ns, 50);
}

TEST(Flame, JsonKeepsTheHeaviestAndCountsTheRest) {
  const FlameNode root = build_flame(two_paths());
  // all nodes kept
  auto all = nlohmann::json::parse(flame_json(root, 0.0, 100));
  EXPECT_EQ(all["value"], 450);
  EXPECT_EQ(all["omitted_nodes"], 0);
  EXPECT_EQ(all["children"][0]["children"][0]["children"][0]["name"], "forward");
  EXPECT_EQ(all["children"][0]["children"][0]["children"][0]["file"], "model.py");
  // a threshold of 20 % drops "load" (50 of 450) into <module>'s self time
  auto cut = nlohmann::json::parse(flame_json(root, 0.2, 100));
  EXPECT_EQ(cut["omitted_nodes"], 1);
  EXPECT_EQ(cut["children"][0]["children"].size(), 1u);
  EXPECT_EQ(cut["children"][0]["self"], 50);
  // a budget of two nodes keeps <module> and step
  auto two = nlohmann::json::parse(flame_json(root, 0.0, 2));
  EXPECT_EQ(two["omitted_nodes"], 2);
  EXPECT_EQ(two["children"][0]["children"][0]["name"], "step");
  EXPECT_TRUE(two["children"][0]["children"][0]["children"].empty());
}


const FlameNode* find(const FlameNode& n, const std::vector<std::string>& path, size_t i = 0) {
  if (i == path.size()) return &n;
  for (const auto& c : n.children)
    if (c.name == path[i]) return find(c, path, i + 1);
  return nullptr;
}

int64_t total_at(const FlameNode& root, const std::vector<std::string>& path) {
  const FlameNode* n = find(root, path);
  return n ? n->total_ns : -1;
}
int64_t self_at(const FlameNode& root, const std::vector<std::string>& path) {
  const FlameNode* n = find(root, path);
  return n ? n->self_ns : -1;
}

OpEvent event(uint32_t name, OpKind kind, uint32_t thread, int64_t start, int64_t end, uint8_t depth) {
  OpEvent e{};
  e.start_ns = start;
  e.end_ns = end;
  e.seq_nr = -1;
  e.name_id = name;
  e.thread_index = thread;
  e.kind = kind;
  e.depth = depth;
  return e;
}

// GIVEN a main thread sampled at known times inside known operator events,
// and an autograd thread with events but no Python stack.
Run joined() {
  torchneck::Run r;
  r.threads = {{1, "MainThread"}, {2, "autograd"}};
  r.python = {fn("<module>", "train.py", 1), fn("train", "train.py", 10), fn("load", "data.py", 3)};
  r.strings = {"aten::mm", "aten::add_", "Optimizer.step#SGD.step", "MmBackward0",
               "autograd::engine::evaluate_function: MmBackward0"};
  r.stacks.push_back({0, {0, 1}, 10, 100});  // 4 of its 10 samples in the window
  r.stacks.push_back({0, {0, 2}, 5, 50});    // none in the window
  r.timeline = {
      event(0, OpKind::kOperator, 0, 100, 200, 0),
      event(2, OpKind::kUserScope, 0, 1000, 2000, 0),
      event(1, OpKind::kOperator, 0, 1200, 1300, 1),
      event(4, OpKind::kOperator, 1, 100, 400, 0),
      event(3, OpKind::kBackward, 1, 110, 390, 1),
      event(0, OpKind::kOperator, 1, 120, 200, 2),
      event(0, OpKind::kOperator, 1, 250, 300, 2),
  };
  r.samples = {{150, 0, 0, 10}, {250, 0, 0, 10}, {1250, 0, 0, 10}, {1300, 0, 0, 10},
               {1400, 0, PySample::kNoStack, 10}};
  return r;
}

TEST(FlameJoin, OperatorsOpenAtASampleGoBelowItsPythonFrames) {
  // WHEN the flame tree is built
  const FlameNode root = build_flame(joined());
  // THEN each windowed sample's weight is at its frames + open events
  const std::vector<std::string> train = {"MainThread", "<module>", "train"};
  EXPECT_EQ(total_at(root, {"MainThread"}), 150);  // all sampled time of the thread
  EXPECT_EQ(total_at(root, train), 100);
  EXPECT_EQ(self_at(root, train), 60 + 10);  // 6 samples outside the window, t=250 in no event
  EXPECT_EQ(total_at(root, {"MainThread", "<module>", "train", "aten::mm"}), 10);
  EXPECT_EQ(total_at(root, {"MainThread", "<module>", "train", "Optimizer.step#SGD.step"}), 20);
  EXPECT_EQ(self_at(root, {"MainThread", "<module>", "train", "Optimizer.step#SGD.step"}), 10);  // t=1300: add_ ended
  EXPECT_EQ(total_at(root, {"MainThread", "<module>", "train", "Optimizer.step#SGD.step", "aten::add_"}), 10);
  EXPECT_EQ(total_at(root, {"MainThread", "<module>", "load"}), 50);
  EXPECT_EQ(find(root, {"MainThread", "<module>", "train", "aten::mm"})->kind, FlameKind::kOperator);
  EXPECT_EQ(find(root, {"MainThread", "<module>", "train", "aten::mm"})->samples, 1u);
  EXPECT_EQ(find(root, {"MainThread"})->samples, 15u);
  // AND the autograd thread is its events' nesting, time-weighted
  const std::vector<std::string> ev = {"autograd", "autograd::engine::evaluate_function: MmBackward0"};
  EXPECT_EQ(total_at(root, ev), 300);
  EXPECT_EQ(self_at(root, ev), 20);
  EXPECT_EQ(total_at(root, {ev[0], ev[1], "MmBackward0"}), 280);
  EXPECT_EQ(self_at(root, {ev[0], ev[1], "MmBackward0"}), 150);
  EXPECT_EQ(total_at(root, {ev[0], ev[1], "MmBackward0", "aten::mm"}), 130);
  EXPECT_EQ(find(root, {ev[0], ev[1], "MmBackward0"})->kind, FlameKind::kBackward);
  EXPECT_EQ(root.total_ns, 150 + 300);
}

TEST(FlameJoin, SamplesOutsideDetailWindowsGoWhereTheStacksWindowedSamplesWent) {
  // GIVEN a --detail=window run: operators recorded in [0, 1000) only; one
  // stack sampled 4 times inside (3 in aten::mm, 1 in aten::add_) and 4
  // times after, a second stack sampled only after
  torchneck::Run r;
  r.threads = {{1, "MainThread"}};
  r.python = {fn("<module>", "train.py", 1), fn("train", "train.py", 10), fn("load", "data.py", 3)};
  r.strings = {"aten::mm", "aten::add_"};
  r.detail_mode = "window";
  r.detail_spans = {{0, 1000}};
  r.stacks.push_back({0, {0, 1}, 8, 80});
  r.stacks.push_back({0, {0, 2}, 2, 20});
  r.timeline = {event(0, OpKind::kOperator, 0, 100, 400, 0), event(1, OpKind::kOperator, 0, 500, 600, 0)};
  r.samples = {{150, 0, 0, 10}, {250, 0, 0, 10}, {350, 0, 0, 10}, {550, 0, 0, 10}, {1100, 0, 0, 10},
               {1200, 0, 0, 10}, {1300, 0, 0, 10}, {1400, 0, 0, 10}, {1500, 0, 1, 10}, {1600, 0, 1, 10}};
  // WHEN the flame tree is built
  const FlameNode root = build_flame(r);
  // THEN the 4 samples after the window split 3:1 like the 4 inside
  const std::vector<std::string> train = {"<module>", "train"};
  EXPECT_EQ(total_at(root, train), 80);
  EXPECT_EQ(total_at(root, {"<module>", "train", "aten::mm"}), 60);
  EXPECT_EQ(total_at(root, {"<module>", "train", "aten::add_"}), 20);
  EXPECT_EQ(self_at(root, train), 0);
  EXPECT_EQ(find(root, {"<module>", "train", "aten::mm"})->samples, 6u);
  EXPECT_EQ(find(root, {"<module>", "train", "aten::add_"})->samples, 2u);
  // AND a stack never sampled inside a window keeps its Python path alone
  EXPECT_EQ(self_at(root, {"<module>", "load"}), 20);
  EXPECT_EQ(root.total_ns, 100);
  // AND without windows (full detail) the samples after 1000 are in no operator
  r.detail_mode = "full";
  const FlameNode full = build_flame(r);
  EXPECT_EQ(self_at(full, train), 40);
  EXPECT_EQ(total_at(full, {"<module>", "train", "aten::mm"}), 30);
}

TEST(FlameJoin, EventsThatDoNotNestCountTheirUnionOnce) {
  torchneck::Run r;
  r.threads = {{7, "t"}};
  r.strings = {"A", "B", "C"};
  r.timeline = {event(0, OpKind::kUserScope, 0, 0, 10, 0), event(1, OpKind::kOperator, 0, 5, 15, 1),
                event(2, OpKind::kOperator, 0, 20, 30, 0)};
  const FlameNode root = build_flame(r);
  EXPECT_EQ(root.total_ns, 25);  // [0,15) and [20,30): the gap is not in the tree
  EXPECT_EQ(self_at(root, {"A"}), 5);
  EXPECT_EQ(total_at(root, {"A", "B"}), 5);
  EXPECT_EQ(total_at(root, {"B"}), 5);  // after A ended, B is on its own
  EXPECT_EQ(total_at(root, {"C"}), 10);
  EXPECT_EQ(find(root, {"A"})->kind, FlameKind::kScope);
}

TEST(FlameJoin, TracedCallsAndOperatorsNestByTime) {
  torchneck::Run r;
  r.run.python_mode = torchneck::PythonMode::kTrace;
  r.threads = {{7, "MainThread"}};
  r.python = {fn("main", "m.py", 1), fn("step", "m.py", 5)};
  r.strings = {"aten::mm"};
  r.py_frames = {{0, 100, 0, 0, 0}, {10, 60, 1, 0, 1}};
  r.timeline = {event(0, OpKind::kOperator, 0, 20, 50, 0)};
  const FlameNode root = build_flame(r);
  EXPECT_EQ(root.total_ns, 100);
  EXPECT_EQ(self_at(root, {"main"}), 50);
  EXPECT_EQ(self_at(root, {"main", "step"}), 20);
  EXPECT_EQ(total_at(root, {"main", "step", "aten::mm"}), 30);
}

TEST(FlameJoin, ModuleCallsNestWithOperatorsAndTheLauncherIsLeftOut) {
  torchneck::Run r;
  r.threads = {{1, "MainThread"}};
  r.python = {fn("_run_code", "<frozen runpy>", 65), fn("run", "/x/torchneck/runner.py", 70),
              fn("<module>", "train.py", 1), fn("forward", "model.py", 9)};
  r.modules = {{"", "Net", 10, -1}, {"fc", "Linear", 10, 0}};
  r.strings = {"aten::addmm"};
  r.stacks.push_back({0, {0, 1, 2, 3}, 2, 20});
  r.stacks.push_back({0, {0, 1}, 1, 5});  // the launcher alone: kept as it is
  r.module_events = {{100, 0, 0, 0, {}}, {110, 1, 0, 0, {}}, {190, 1, 0, 1, {}}, {200, 0, 0, 1, {}}};
  r.timeline = {event(0, OpKind::kOperator, 0, 120, 180, 0)};
  r.samples = {{150, 0, 0, 10}, {195, 0, 0, 10}};
  const FlameNode root = build_flame(r);
  EXPECT_EQ(root.total_ns, 25);
  EXPECT_EQ(total_at(root, {"<module>", "forward", "Net", "fc (Linear)", "aten::addmm"}), 10);
  EXPECT_EQ(self_at(root, {"<module>", "forward", "Net"}), 10);
  EXPECT_EQ(find(root, {"<module>", "forward", "Net"})->kind, FlameKind::kModule);
  EXPECT_EQ(total_at(root, {"_run_code", "run"}), 5);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

// Parses stacks.folded back: every line `frames N`, and the sum of N.
int64_t folded_total(const std::string& text, size_t* n_lines = nullptr) {
  const std::regex line_re("^([^\\n]+) (\\d+)$");
  EXPECT_TRUE(text.empty() || text.back() == '\n');
  int64_t sum = 0;
  const auto lines = lines_of(text);
  for (const auto& l : lines) {
    std::smatch m;
    EXPECT_TRUE(std::regex_match(l, m, line_re)) << l;
    if (m.size() == 3) sum += std::stoll(m[2].str());
  }
  if (n_lines) *n_lines = lines.size();
  return sum;
}

TEST(FlameFiles, FoldedLinesAddUpToTheRootInMicroseconds) {
  torchneck::Run r = joined();
  for (auto& st : r.stacks) st.weight_ns *= 1000;  // whole microseconds
  for (auto& x : r.samples) x.weight_ns *= 1000;
  for (auto& e : r.timeline) {
    e.start_ns *= 1000;
    e.end_ns *= 1000;
  }
  for (auto& x : r.samples) x.t_ns *= 1000;
  const FlameNode root = build_flame(r);
  const std::string folded = folded_stacks(root);
  size_t n = 0;
  EXPECT_EQ(folded_total(folded, &n) * 1000, root.total_ns);
  EXPECT_NE(folded.find("MainThread;<module> (train.py:1);train (train.py:10);aten::mm 10\n"), std::string::npos)
      << folded;
  EXPECT_NE(folded.find("MainThread;<module> (train.py:1);train (train.py:10) 70\n"), std::string::npos);
  // rounding of odd values still adds up to the rounded total
  const FlameNode odd = build_flame(joined());
  EXPECT_EQ(folded_total(folded_stacks(odd)), (odd.total_ns + 500) / 1000);
}

TEST(FlameFiles, PruningKeepsTheTotal) {
  const FlameNode root = build_flame(joined());
  torchneck::Run big = joined();
  for (auto& st : big.stacks) st.weight_ns *= 1000;
  for (auto& x : big.samples) x.weight_ns *= 1000;
  const FlameNode b = build_flame(big);
  size_t full = 0, small = 0;
  const int64_t t_full = folded_total(folded_stacks(b), &full);
  const int64_t t_small = folded_total(folded_stacks(b, 2), &small);
  EXPECT_EQ(t_full, t_small);
  EXPECT_LT(small, full);
  (void)root;
}

void check_speedscope(const FlameNode& root, const std::string& text) {
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["$schema"], "https://www.speedscope.app/file-format-schema.json");
  const size_t nframes = j["shared"]["frames"].size();
  for (const auto& f : j["shared"]["frames"]) EXPECT_TRUE(f["name"].is_string());
  int64_t all = 0;
  for (const auto& p : j["profiles"]) {
    EXPECT_EQ(p["type"], "sampled");
    EXPECT_EQ(p["unit"], "nanoseconds");
    ASSERT_EQ(p["samples"].size(), p["weights"].size());
    int64_t sum = 0;
    for (const auto& w : p["weights"]) sum += w.get<int64_t>();
    for (const auto& s : p["samples"])
      for (const auto& f : s) EXPECT_LT(f.get<size_t>(), nframes);
    EXPECT_EQ(p["startValue"], 0);
    EXPECT_EQ(p["endValue"].get<int64_t>(), sum);
    // a thread's profile weighs what its node does
    const FlameNode* t = find(root, {p["name"].get<std::string>()});
    if (t && t->kind == FlameKind::kThread) {
      EXPECT_EQ(sum, t->total_ns);
    }
    all += sum;
  }
  EXPECT_EQ(all, root.total_ns);
}

TEST(FlameFiles, SpeedscopeHasOneProfilePerThreadAndFramesInRange) {
  const FlameNode root = build_flame(joined());
  const std::string text = speedscope_json(root, "train.py");
  check_speedscope(root, text);
  const auto j = nlohmann::json::parse(text);
  ASSERT_EQ(j["profiles"].size(), 2u);
  EXPECT_EQ(j["profiles"][0]["name"], "autograd");  // heaviest first
  EXPECT_EQ(j["profiles"][1]["name"], "MainThread");
  // the stack of aten::mm below train, by frame names
  bool found = false;
  for (const auto& s : j["profiles"][1]["samples"]) {
    std::string names;
    for (const auto& f : s) names += j["shared"]["frames"][f.get<size_t>()]["name"].get<std::string>() + "/";
    found = found || names == "<module>/train/aten::mm/";
  }
  EXPECT_TRUE(found);
  // a single thread: one profile named after the run
  torchneck::Run one;
  one.threads = {{1, "MainThread"}};
  one.python = {fn("f", "a.py", 1)};
  one.stacks.push_back({0, {0}, 3, 30});
  const FlameNode r1 = build_flame(one);
  const auto j1 = nlohmann::json::parse(speedscope_json(r1, "a.py"));
  ASSERT_EQ(j1["profiles"].size(), 1u);
  EXPECT_EQ(j1["profiles"][0]["name"], "a.py");
  EXPECT_EQ(j1["profiles"][0]["weights"][0], 30);
  EXPECT_EQ(j1["shared"]["frames"][0]["file"], "a.py");
  check_speedscope(r1, speedscope_json(r1, "a.py"));
}

TEST(FlameFiles, HostileNamesStayOneLineAndValidJson) {
  torchneck::Run r;
  r.threads = {{1, "Main\nThread"}};
  const std::string cls = "<img src=x onerror=alert(1)>";
  const std::string file = "/tmp/a</script>;b\nc/x.py";
  r.python = {fn("<module>", file.c_str(), 1), fn(cls.c_str(), file.c_str(), 3)};
  r.strings = {std::string("aten::x;y\r\n\x01z\xff", 14)};
  r.stacks.push_back({0, {0, 1}, 2, 4000});
  r.samples = {{10, 0, 0, 2000}};
  r.timeline = {event(0, OpKind::kOperator, 0, 5, 20, 0)};
  const FlameNode root = build_flame(r);
  const std::string folded = folded_stacks(root);
  size_t n = 0;
  EXPECT_EQ(folded_total(folded, &n), 4);
  EXPECT_EQ(n, 2u);  // two paths, two lines
  EXPECT_NE(folded.find(cls + " (/tmp/a</script>:b c/x.py:3)"), std::string::npos) << folded;
  EXPECT_NE(folded.find(";aten::x:y   z\xef\xbf\xbd 2\n"), std::string::npos) << folded;
  EXPECT_EQ(sanitize_folded(""), "?");
  EXPECT_EQ(sanitize_folded("\xe2\x82\xac ok"), "\xe2\x82\xac ok");  // valid UTF-8 passes
  const std::string js = speedscope_json(root, file);
  EXPECT_EQ(js.find("</script>"), std::string::npos);  // escaped for embedding in HTML
  check_speedscope(root, js);
  const auto j = nlohmann::json::parse(js);
  bool cls_found = false;
  for (const auto& f : j["shared"]["frames"])
    if (f["name"] == cls) cls_found = f["file"] == file;
  EXPECT_TRUE(cls_found);
  EXPECT_EQ(j["name"], file);
}

TEST(FlameFiles, EmptyRunWritesEmptyFiles) {
  const FlameNode root = build_flame(torchneck::Run{});
  EXPECT_EQ(folded_stacks(root), "");
  check_speedscope(root, speedscope_json(root, "x"));
}

}  // namespace
}  // namespace torchneck
