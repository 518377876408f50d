// The flame tree: every sampled nanosecond lands on exactly one path, and the
// JSON for report.html keeps the heaviest nodes and says how many it left out.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analyze/flame.h"
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
  Run r;
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

}  // namespace
}  // namespace torchneck
