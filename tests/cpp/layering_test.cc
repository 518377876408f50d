// The layers of docs/architecture.md, checked on the sources: each folder of
// src/ includes only the layers below it (one direction of flow, collect /
// ingest -> model -> analyze -> report). A new include that runs back up
// fails here, naming the file and the line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Project folders each layer may include ("torchneck" is include/torchneck,
// the record schema; third-party headers have no folder of ours and are
// not checked here).
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> m = {
      {"core", {"core", "torchneck"}},
      {"model", {"core", "model", "torchneck"}},
      {"ingest", {"core", "model", "ingest", "torchneck"}},
      {"collect", {"core", "model", "collect", "torchneck"}},
      {"analyze", {"core", "model", "analyze", "torchneck"}},
      {"report", {"core", "model", "analyze", "report", "torchneck"}},
      // The front door: sources -> analysis -> files. Above it, the commands
      // reach analysis and ingest only through it.
      {"pipeline", {"core", "model", "ingest", "analyze", "report", "pipeline", "torchneck"}},
      {"compare", {"core", "model", "report", "pipeline", "compare", "torchneck"}},
      {"bindings", {"core", "model", "collect", "report", "pipeline", "bindings", "torchneck"}},
      {"tools", {"core", "model", "report", "pipeline", "compare", "tools", "torchneck"}},
  };
  return m;
}

const std::set<std::string>& project_folders() {
  static const std::set<std::string> s = {"core",   "model",    "ingest", "collect", "analyze", "report",
                                          "pipeline", "compare", "bindings", "tools",  "torchneck"};
  return s;
}

struct Violation {
  std::string file;
  int line;
  std::string include;
};

std::vector<Violation> violations(const fs::path& src) {
  std::vector<Violation> out;
  const std::regex include(R"re(^\s*#\s*include\s*"([A-Za-z_]+)/[^"]*")re");
  for (const auto& [layer, ok] : allowed()) {
    const fs::path dir = src / layer;
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cc" && ext != ".def")) continue;
      std::ifstream in(e.path());
      std::string text;
      int n = 0;
      while (std::getline(in, text)) {
        ++n;
        std::smatch m;
        if (!std::regex_search(text, m, include)) continue;
        const std::string folder = m[1];
        if (project_folders().count(folder) > 0 && ok.count(folder) == 0)
          out.push_back({fs::relative(e.path(), src).string(), n, text});
      }
    }
  }
  return out;
}

TEST(Layering, NoLayerIncludesALayerAboveIt) {
  const fs::path src = fs::path(TORCHNECK_SOURCE_DIR) / "src";
  ASSERT_TRUE(fs::exists(src / "analyze" / "analysis.h")) << src;
  for (const Violation& v : violations(src)) ADD_FAILURE() << v.file << ":" << v.line << ": " << v.include;
}

TEST(Layering, TheCheckSeesAnIncludeThatRunsBackUp) {
  // GIVEN a copy of the layout with one analysis file that includes ingest
  const fs::path root = fs::temp_directory_path() / ("torchneck-layering-" + std::to_string(::getpid()));
  fs::create_directories(root / "analyze");
  fs::create_directories(root / "model");
  std::ofstream(root / "analyze" / "bad.cc") << "#include <vector>\n#include \"model/run.h\"\n  #include \"ingest/kineto_trace.h\"\n";
  std::ofstream(root / "model" / "good.h") << "#include \"core/clock.h\"\n#include \"simdjson.h\"\n";
  // WHEN checked THEN exactly that line is named
  const std::vector<Violation> v = violations(root);
  fs::remove_all(root);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].file, "analyze/bad.cc");
  EXPECT_EQ(v[0].line, 3);
}

}  // namespace
