// report.html's writer: data escaped so no name can close its <script>
// element, a CSP hash in the form browsers expect, and a page that stays
// under its stated size on a 10,000-step run with many functions and
// operators. (The page itself is tested in a browser: tests/python/test_report_html.py.)
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <string>

#include "analyze/analysis.h"
#include "report/html_report.h"
#include "report/profile_json.h"
#include "report/web_assets.h"

namespace torchneck {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// The text between <script type="application/json" id="torchneck-data"> and its end.
std::string data_block(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"torchneck-data\">";
  const size_t a = page.find(open);
  EXPECT_NE(a, std::string::npos);
  const size_t b = page.find("</script>", a);
  return page.substr(a + open.size(), b - a - open.size());
}

TEST(HtmlReport, HostileStringsStayInsideTheDataBlock) {
  // GIVEN names that would end the data block, open a comment, or look like
  // a template placeholder, and the line separators JavaScript once rejected
  const std::string hostile = "</script><script>alert(1)</script><!-- {{SCRIPT}} & \xE2\x80\xA8 \xE2\x80\xA9 </SCRIPT >";
  nlohmann::json profile = {{"verdict", hostile}, {"layers", {{{"name", hostile}, {"type", "<img src=x onerror=alert(1)>"}}}}};
  nlohmann::json flame = {{"name", hostile}, {"kind", "root"}, {"value", 1}, {"self", 1}, {"children", nlohmann::json::array()}};
  // WHEN the page is made
  const std::string page = html_report(profile.dump(), flame.dump());
  // THEN the only ends of script elements are the template's two, the data
  // block holds no '<', '>', '&' or raw U+2028/9, and it parses back to what went in
  std::string lower = page;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  EXPECT_EQ(count(lower, "</script"), 2u);
  EXPECT_EQ(count(page, "<!--"), 0u);
  const std::string data = data_block(page);
  EXPECT_EQ(data.find_first_of("<>&"), std::string::npos);
  EXPECT_EQ(data.find("\xE2\x80\xA8"), std::string::npos);
  EXPECT_EQ(data.find("\xE2\x80\xA9"), std::string::npos);
  const auto back = nlohmann::json::parse(data);
  EXPECT_EQ(back["profile"], profile);
  EXPECT_EQ(back["flame"], flame);
  // and the placeholder inside the data was not expanded
  EXPECT_EQ(count(page, std::string(web::report_js().substr(0, 60))), 1u);
}

TEST(HtmlReport, CspNamesTheInlineScriptByItsHash) {
  // The base64 of SHA-256("") is a published constant.
  EXPECT_EQ(hex_to_base64("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
  EXPECT_EQ(hex_to_base64("4d616e"), "TWFu");
  EXPECT_EQ(hex_to_base64("4d61"), "TWE=");
  const std::string page = html_report("{}", "");
  EXPECT_NE(page.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(page.find("script-src 'sha256-" + hex_to_base64(web::report_js_sha256_hex()) + "'"), std::string::npos);
  EXPECT_EQ(page.find("unsafe-inline"), std::string::npos);
  // The script in the page is byte for byte the file that was hashed.
  EXPECT_NE(page.find("<script>" + std::string(web::report_js()) + "</script>"), std::string::npos);
  // No reference to anything outside the page.
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg"));  // the SVG namespace only
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);
  EXPECT_EQ(page.find("href=\""), std::string::npos);
}

// A run of 10,000 steps: DataLoader fetch, forward op, backward node and
// optimizer step in each; 3,000 Python functions in deep sampled stacks;
// 2,000 distinct operators with long shapes.
Run long_run(size_t steps) {
  Run run;
  run.run.script = "train.py";
  run.run.python_mode = PythonMode::kSample;
  run.threads = {{1, "MainThread"}};
  auto id = [&](const std::string& s) {
    run.strings.push_back(s);
    return static_cast<uint32_t>(run.strings.size() - 1);
  };
  const uint32_t next = id("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  const uint32_t mm = id("aten::mm");
  const uint32_t bwd = id("autograd::engine::evaluate_function: MmBackward0");
  const uint32_t opt = id("Optimizer.step#SGD.step");
  auto ev = [&](uint32_t name, OpKind kind, int64_t a, int64_t b) {
    OpEvent e{};
    e.start_ns = a;
    e.end_ns = b;
    e.seq_nr = -1;
    e.forward_tid = 1;
    e.name_id = name;
    e.kind = kind;
    run.timeline.push_back(e);
  };
  for (size_t i = 0; i < steps; ++i) {
    const int64_t t = static_cast<int64_t>(i) * 1000000;
    ev(next, OpKind::kUserScope, t, t + 100000);
    ev(mm, OpKind::kOperator, t + 150000, t + 400000);
    ev(bwd, OpKind::kBackward, t + 450000, t + 800000);
    ev(opt, OpKind::kUserScope, t + 850000, t + 950000);
  }
  for (int f = 0; f < 3000; ++f) {
    PyFunctionStats s;
    s.function = "function_with_a_rather_long_name_" + std::to_string(f);
    s.file = "/home/someone/projects/a/long/path/to/the/package/module_" + std::to_string(f % 50) + ".py";
    s.line = f;
    s.self_ns = 1000 + f;
    s.total_ns = 100000 + f;
    s.self_samples = 1;
    s.total_samples = 2;
    run.python.push_back(s);
  }
  for (uint32_t k = 0; k < 3000; ++k) {  // stacks 30 deep
    SampledStack st;
    for (uint32_t d = 0; d < 30; ++d) st.frames.push_back((k * 7 + d * 13) % 3000);
    st.samples = 1;
    st.weight_ns = 1000000 + k;
    run.stacks.push_back(st);
  }
  for (int o = 0; o < 2000; ++o) {
    OpStats s;
    s.name = "custom::operator_number_" + std::to_string(o);
    s.calls = 10000;
    s.self_ns = 1000 + o;
    s.total_ns = 2000 + o;
    for (int k = 0; k < 8; ++k)
      s.shapes.push_back({"[[32, 3, 224, 224], [64, 3, 7, 7], [64], int[2], int[2], int[2], bool, int[2], int] float" + std::to_string(k), 5});
    run.ops.push_back(s);
  }
  return run;
}

TEST(HtmlReport, TenThousandStepsStayUnderTheStatedSize) {
  // GIVEN a 10,000-step run whose profile.json is several MiB
  const torchneck::Run run = long_run(10000);
  Analysis analysis = analyze(run, SummaryOptions{});
  add_flame(analysis, run);
  ASSERT_EQ(analysis.steps.steps.size(), 10000u);
  const std::string full = profile_json(run, analysis);
  EXPECT_GT(full.size(), kHtmlReportMaxBytes);
  // WHEN report.html is made
  const std::string page = html_report_for_run(run, analysis);
  // THEN it stays under the bound, with the steps thinned evenly, the
  // heaviest rows kept, and the limits said
  EXPECT_LE(page.size(), kHtmlReportMaxBytes);
  std::printf("10,000 steps: profile.json %zu bytes, report.html %zu bytes (bound %zu)\n", full.size(), page.size(),
              kHtmlReportMaxBytes);
  const auto data = nlohmann::json::parse(data_block(page));
  const auto& p = data["profile"];
  EXPECT_EQ(p["steps"]["count"], 10000);
  EXPECT_LE(p["steps"]["per_step"].size(), 1000u);
  EXPECT_GE(p["steps"]["per_step"].size(), 500u);
  const size_t every = p["html_limits"]["per_step_every"].get<size_t>(), kept = p["steps"]["per_step"].size();
  EXPECT_GE(every * kept, 10000u);  // every k-th step, from the first to the end
  EXPECT_LT(every * (kept - 1), 10000u);
  EXPECT_EQ(p["html_limits"]["ops_rows"], 2000);
  EXPECT_EQ(p["html_limits"]["python_rows"], 3000);
  EXPECT_LT(p["ops"].size(), 2000u);
  EXPECT_EQ(p["ops"][0]["name"], "custom::operator_number_1700");  // heaviest 300 by self: numbers 1700..1999, in run order
  EXPECT_GT(data["flame"]["omitted_nodes"].get<int64_t>(), 0);
  // and a tighter bound is kept too, by halving the caps
  EXPECT_LE(html_report_for_run(run, analysis, 400u << 10).size(), 400u << 10);
}

}  // namespace
}  // namespace torchneck
