// Summary ranking, JSON escaping and the pstats (marshal) encoding.
#include <gtest/gtest.h>

#include <string>

#include "analyze/analysis.h"
#include "analyze/summary.h"
#include "model/op_merge.h"
#include "pipeline/options.h"
#include "report/json_writer.h"
#include "report/profile_json.h"
#include "report/pstats_writer.h"
#include "report/terminal_report.h"

namespace torchneck {
namespace {

OpStats op(const std::string& name, OpKind kind, uint64_t calls, int64_t self_ns, int64_t total_ns) {
  OpStats o;
  o.name = name;
  o.kind = kind;
  o.calls = calls;
  o.self_ns = self_ns;
  o.total_ns = total_ns;
  return o;
}

torchneck::Run sample_run() {
  torchneck::Run run;
  run.run.script = "train.py";
  run.run.python_mode = torchneck::PythonMode::kTrace;
  run.ops.push_back(op("aten::addmm", OpKind::kOperator, 10, 6'000'000, 7'000'000));
  run.ops.push_back(op("aten::relu", OpKind::kOperator, 10, 2'000'000, 2'000'000));
  run.ops.push_back(op("AddmmBackward0", OpKind::kBackward, 10, 1'000'000, 9'000'000));
  run.ops.push_back(op("Optimizer.step#SGD.step", OpKind::kUserScope, 5, 500'000, 3'000'000));
  run.ops.push_back(op("aten::mm", OpKind::kOperator, 20, 2'000'000, 2'000'000));
  PyFunctionStats f;
  f.function = "step";
  f.file = "/home/u/train.py";
  f.line = 12;
  f.calls = 3;
  f.primitive_calls = 2;
  f.self_ns = 1'500'000;
  f.total_ns = 4'000'000;
  run.python.push_back(f);
  PyFunctionStats len;
  len.function = "<built-in method builtins.len>";
  len.file = "~";
  len.builtin = true;
  len.calls = len.primitive_calls = 7;
  len.self_ns = len.total_ns = 700;
  len.callers.push_back(CallerEdge{0, 7, 7, 700, 700});
  run.python.push_back(len);
  return run;
}

TEST(Summary, RanksOperatorsBySelfTimeWithinTheirKind) {
  // GIVEN operators, a backward node and a user scope
  const torchneck::Run run = sample_run();
  // WHEN summarised
  const Summary s = summarize(run, SummaryOptions{});
  // THEN operators are ranked by self time, ties broken by name, and the
  // other kinds are kept apart
  ASSERT_EQ(s.top_ops.size(), 3u);
  EXPECT_EQ(run.ops[s.top_ops[0]].name, "aten::addmm");
  EXPECT_EQ(run.ops[s.top_ops[1]].name, "aten::mm");  // 2 ms tie: "mm" < "relu"
  EXPECT_EQ(run.ops[s.top_ops[2]].name, "aten::relu");
  EXPECT_EQ(s.op_self_ns, 10'000'000);
  EXPECT_EQ(s.op_calls, 40u);
  ASSERT_EQ(s.top_backward.size(), 1u);
  EXPECT_EQ(run.ops[s.top_backward[0]].name, "AddmmBackward0");
  ASSERT_EQ(s.top_scopes.size(), 1u);
  EXPECT_DOUBLE_EQ(share(6, 10), 0.6);
  EXPECT_DOUBLE_EQ(share(1, 0), 0.0);
}

TEST(Summary, TopNBoundsTheTables) {
  const torchneck::Run run = sample_run();
  SummaryOptions o;
  o.top_ops = 1;
  const Summary s = summarize(run, o);
  EXPECT_EQ(s.top_ops.size(), 1u);
}

TEST(JsonWriter, EscapesEverythingThatCouldBreakJsonOrHtml) {
  JsonWriter w;
  w.begin_object().field("name", "<img src=x onerror=alert(1)>\"\\\n</script>\x01").end_object();
  EXPECT_EQ(w.str(),
            "{\"name\":\"\\u003cimg src=x onerror=alert(1)\\u003e\\\"\\\\\\n\\u003c/script\\u003e\\u0001\"}");
}

TEST(JsonWriter, InvalidUtf8BecomesReplacementCharacter) {
  std::string out;
  append_json_escaped(out, std::string("ok\xc3\xa9\xff", 5));
  EXPECT_EQ(out, "ok\xc3\xa9\\ufffd");
}

TEST(JsonWriter, NestingAndCommas) {
  JsonWriter w;
  w.begin_object();
  w.key("a").begin_array().value(1).value(2.5).null().end_array();
  w.field("b", true);
  w.key("c").begin_object().end_object();
  w.end_object();
  EXPECT_EQ(w.str(), "{\"a\":[1,2.5,null],\"b\":true,\"c\":{}}");
}

TEST(ProfileJson, CarriesSchemaAndSampleModeHasNoCallCounts) {
  torchneck::Run run = sample_run();
  run.run.python_mode = torchneck::PythonMode::kSample;
  const std::string j = profile_json(run, analyze(run, SummaryOptions{}));
  EXPECT_NE(j.find("\"schema\": \"torchneck.profile/2\""), std::string::npos);
  EXPECT_NE(j.find("\"calls\": null"), std::string::npos);
  EXPECT_NE(j.find("\"dropped_events\": 0"), std::string::npos);
}

TEST(PstatsWriter, EncodesCProfileDictInMarshalFormat) {
  torchneck::Run run;
  PyFunctionStats f;
  f.function = "f";
  f.file = "a.py";
  f.line = 3;
  f.calls = 5;
  f.primitive_calls = 2;
  f.self_ns = 500'000'000;  // 0.5 s
  f.total_ns = 1'000'000'000;
  run.python.push_back(f);
  const std::string b = pstats_bytes(run);
  // { ( 3 'u' 4 "a.py" 'i' 3 'u' 1 "f" ) ( 5 'i' 2 'i' 5 'g' 0.5 'g' 1.0 { 0 ) 0
  std::string expected = "{";
  expected += std::string("(\x03\0\0\0", 5);
  expected += std::string("u\x04\0\0\0a.py", 9);
  expected += std::string("i\x03\0\0\0", 5);
  expected += std::string("u\x01\0\0\0f", 6);
  expected += std::string("(\x05\0\0\0", 5);
  expected += std::string("i\x02\0\0\0", 5);
  expected += std::string("i\x05\0\0\0", 5);
  const double half = 0.5, one = 1.0;
  expected += 'g';
  expected.append(reinterpret_cast<const char*>(&half), 8);
  expected += 'g';
  expected.append(reinterpret_cast<const char*>(&one), 8);
  expected += "{0";
  expected += "0";
  EXPECT_EQ(b, expected);
}

TEST(TerminalReport, PrintsCProfileColumnsAndPstatsLabels) {
  const torchneck::Run run = sample_run();
  const std::string text = terminal_report(run, analyze(run, SummaryOptions{}), TerminalReportOptions{"/home/u"});
  EXPECT_NE(text.find("ncalls    tottime    percall    cumtime    percall"), std::string::npos);
  EXPECT_NE(text.find("3/2"), std::string::npos);  // recursive: total/primitive
  EXPECT_NE(text.find("train.py:12(step)"), std::string::npos);
  EXPECT_NE(text.find("{built-in method builtins.len}"), std::string::npos);
  EXPECT_NE(text.find("aten::addmm"), std::string::npos);
  EXPECT_NE(text.find("60.0%"), std::string::npos);  // 6 of 10 ms operator self time
  EXPECT_NE(text.find("AddmmBackward0"), std::string::npos);
}

TEST(TerminalReport, FilesSectionNamesOnlyWhatWasWrittenAndWhatFailed) {
  const std::string text = files_section("out", {{"report.html", "open in a browser"}, {"python.pstats", "pstats"}},
                                         {"trace.json: No space left on device"});
  EXPECT_NE(text.find("out/python.pstats"), std::string::npos);
  EXPECT_NE(text.find("open in a browser"), std::string::npos);
  EXPECT_LT(text.find("out/report.html"), text.find("out/python.pstats"));  // in the order given
  EXPECT_EQ(text.find("out/trace.json"), std::string::npos);
  EXPECT_EQ(text.find("out/report.txt"), std::string::npos);
  EXPECT_NE(text.find("not written: trace.json: No space left on device"), std::string::npos);
}

}  // namespace
}  // namespace torchneck

namespace torchneck {
namespace {

TEST(TerminalReport, ModulesNeverCalledInTrainingAreNotTopLayers) {
  // GIVEN a model whose decoder was called in 68 steps, and a copy of it
  // loaded after training (word_language_model's test pass): no calls
  torchneck::Run run = sample_run();
  torchneck::Analysis a = torchneck::analyze(run, SummaryOptions{});
  LayerStats called, copy;
  called.name = "RNNModel#1.decoder";
  called.type = copy.type = "Linear";
  called.calls = 68;
  called.forward_ns = 7'000'000;
  called.backward_ns = 21'000'000;
  copy.name = "RNNModel#2.decoder";
  a.layers.layers = {called, copy};
  // THEN the table lists the called one only
  std::string text = terminal_report(run, a, TerminalReportOptions{""});
  EXPECT_NE(text.find("Layers, top 15"), std::string::npos) << text;
  EXPECT_NE(text.find("RNNModel#1.decoder"), std::string::npos) << text;
  EXPECT_EQ(text.find("RNNModel#2.decoder"), std::string::npos) << text;
  // AND with no module called, no table at all
  a.layers.layers = {copy};
  text = terminal_report(run, a, TerminalReportOptions{""});
  EXPECT_EQ(text.find("Layers, top "), std::string::npos) << text;
}

TEST(TerminalReport, TopSetsTheRowsOfEveryTable) {
  // GIVEN three called layers and --top 2
  torchneck::Run run = sample_run();
  PipelineOptions options;
  options.settings.top = 2;
  torchneck::Analysis a = torchneck::analyze(run, options.summary());
  for (const char* name : {"a", "b", "c"}) {
    LayerStats l;
    l.name = name;
    l.type = "Linear";
    l.calls = 1;
    l.forward_ns = 1'000'000 * (4 - (name[0] - 'a'));
    a.layers.layers.push_back(l);
  }
  // THEN the layer table holds two rows, and the summary ranks two rows
  // of each of its tables
  const std::string text = terminal_report(run, a, TerminalReportOptions{"", options.settings.top});
  EXPECT_NE(text.find("Layers, top 2 by"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  b "), std::string::npos) << text;
  EXPECT_EQ(text.find("\n  c "), std::string::npos) << text;
  const SummaryOptions s = options.summary();
  for (size_t rows : {s.top_python, s.top_ops, s.top_backward, s.top_scopes}) EXPECT_EQ(rows, 2u);
}

TEST(OpMerger, SumsThreadsPerNameAndKindAndKeepsKindsApart) {
  // GIVEN two threads' aggregates for the same op, and a backward node that
  // shares a name with nothing
  OpMerger m;
  m.add("aten::mm", OpKind::kOperator, 0, 10, 100, 150);
  m.add("aten::mm", OpKind::kOperator, 3, 5, 50, 60);
  m.add("aten::mm", OpKind::kUserScope, 0, 1, 7, 7);  // same text, other kind
  m.add("MmBackward0", OpKind::kBackward, 2, 4, 30, 300);
  m.add_shapes("only_shapes", OpKind::kOperator, "[[1]]", 3);  // no completed call
  // WHEN merged
  std::vector<OpStats> out;
  m.finish(out, 8);
  // THEN one entry per (name, kind), sorted by self time
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].name, "aten::mm");
  EXPECT_EQ(out[0].kind, OpKind::kOperator);
  EXPECT_EQ(out[0].calls, 15u);
  EXPECT_EQ(out[0].self_ns, 150);
  EXPECT_EQ(out[0].total_ns, 210);
  EXPECT_EQ(out[0].thread_indices, (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(out[1].name, "MmBackward0");
  EXPECT_EQ(out[2].kind, OpKind::kUserScope);
}

TEST(OpMerger, ShapesMostFrequentFirstWithTheTailFoldedIntoOther) {
  OpMerger m;
  m.add("aten::add", OpKind::kOperator, 0, 100, 1, 1);
  m.add_shapes("aten::add", OpKind::kOperator, "[[4]]", 10);
  m.add_shapes("aten::add", OpKind::kOperator, "[[8]]", 30);
  m.add_shapes("aten::add", OpKind::kOperator, "[[2]]", 5);
  m.add_shapes("aten::add", OpKind::kOperator, "[[1]]", 2);
  m.add_shapes("aten::add", OpKind::kOperator, "[[8]]", 1);  // another thread's count
  std::vector<OpStats> out;
  m.finish(out, 3);
  ASSERT_EQ(out.size(), 1u);
  const auto& s = out[0].shapes;
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].shapes, "[[8]]");
  EXPECT_EQ(s[0].count, 31u);
  EXPECT_EQ(s[1].shapes, "[[4]]");
  EXPECT_EQ(s[2].shapes, kOtherShapes);  // 5 + 2 folded
  EXPECT_EQ(s[2].count, 7u);
}

}  // namespace
}  // namespace torchneck
