// The spill file: a Run written and read back is the same Run, and a damaged
// file is an error naming a byte offset and the section, never a crash and
// never a run with other numbers.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <future>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/files.h"
#include "model/run_io.h"
#include "model/run_io_codec.h"
#include "report/profile_json.h"
#include "analyze/analysis.h"
#include "spill_blocks.h"

namespace torchneck {
namespace {

// Every field set to something other than its default.
Run full_run() {
  Run r;
  r.run.script = "train.py";
  r.run.argv = {"train.py", "--epochs", "3", "h\xc3\xa9"};
  r.run.exit_code = 139;
  r.run.wall_s = 12.5;
  r.run.main_thread_cpu_s = 11.25;
  r.run.python_mode = PythonMode::kTrace;
  r.run.ending = RunEnding{EndingKind::kFatalSignal, SIGSEGV};
  r.run.start_unix_s = 1.7e9;
  r.env.python = "3.11.2";
  r.env.torch = "2.6.0";
  r.env.cpu_cores = 8;
  r.env.torch_threads = 4;
  r.env.cuda = true;
  r.env.dataloaders.push_back({4, 32, true, true, 2, "ImageFolder", "train.py:40"});
  r.env.dataloaders.push_back({0, -1, false, false, -1, "TensorDataset", "train.py:41"});
  r.env.optimizers.push_back({"Adam", 62, true});
  r.threads = {{100, "MainThread"}, {101, "pin_memory"}};
  PyFunctionStats f;
  f.function = "forward";
  f.file = "model.py";
  f.line = 12;
  f.calls = 10;
  f.primitive_calls = 9;
  f.self_ns = 5;
  f.total_ns = 50;
  f.self_samples = 3;
  f.total_samples = 30;
  PyFunctionStats g = f;
  g.function = "<built-in method builtins.len>";
  g.file = "~";
  g.builtin = true;
  g.callers.push_back({0, 4, 3, 2, 1});
  r.python = {f, g};
  r.stacks.push_back({1, {0, 1}, 7, 70000});
  r.python_samples = 99;
  OpStats op;
  op.name = "aten::mm";
  op.kind = OpKind::kOperator;
  op.calls = 5;
  op.self_ns = 500;
  op.total_ns = 600;
  op.shapes = {{"[[8, 8], [8, 8]] float,float", 3}};
  op.thread_indices = {0, 1};
  r.ops = {op};
  r.strings = {"aten::mm", "MmBackward0"};
  OpEvent ev{};
  ev.start_ns = 10;
  ev.end_ns = 20;
  ev.seq_nr = 4;
  ev.forward_tid = 1;
  ev.name_id = 1;
  ev.thread_index = 1;
  ev.kind = OpKind::kBackward;
  ev.depth = 2;
  r.timeline = {ev, ev};
  r.main_thread = 0;
  r.dropped_events = 77;
  r.data_wait_ns = 5'000'000;
  r.data_wait_cpu_ns = 1'250'000;
  r.data_wait_runqueue_ns = 750'000;
  r.step_clocks = {{100, 40, 5, 0, 1, 30}, {200, 90, -1, 1, 4096, 7000000000}};
  r.modules = {{"model", "Net", 100, -1}, {"model.fc", "Linear", 90, 0, false, "in_features=8, out_features=10, bias=True", 0},
               {"model.head", "Head", 10, 0, true}};
  ModuleEvent me{};
  me.t_ns = 15;
  me.module = 1;
  me.thread_index = 0;
  me.is_exit = 1;
  r.module_events = {me};
  r.dropped_module_events = 3;
  r.notes = {"a note"};
  r.samples = {{40, 1, 0, 5}, {45, 0, PySample::kNoStack, 7}};
  r.dropped_samples = 6;
  r.py_frames = {{10, 30, 1, 0, 2}};
  r.dropped_py_frames = 8;
  r.memory = {{5, 300 << 20, -1}, {105, 310 << 20, 123}};
  r.memory_interval_ns = 200'000'000;
  r.gc_pauses = {{11, 19, 2, 42}};
  r.gc.collections = 9;
  r.gc.total_ns = 90;
  r.gc.max_ns = 8;
  r.gc.by_generation[0] = 7;
  r.gc.by_generation[2] = 2;
  r.gc.ns_by_generation[1] = 3;
  r.gc.collected = 42;
  r.gc.dropped = 8;
  r.gc_observed = true;
  r.growing_graphs = {{"total_loss", "train", "/w/train.py", 42, "total_loss += loss", 6, 156, 20000, 2, 32}};
  r.gpu_window.mode = "auto";
  r.gpu_window.state = GpuWindowState::kRecorded;
  r.gpu_window.trace_path = "/out/gpu/kineto.trace.json";
  r.gpu_window.activities = {"cpu", "cuda"};
  r.gpu_window.first_step = 5;
  r.gpu_window.last_step = 9;
  r.gpu_window.clock_offset_ns = -1796115280594561046;
  r.gpu_window.alignment_residual_ns = 20;
  r.gpu_window.cuda_peak_allocated = {3 << 20};
  r.gpu_window.cuda_peak_reserved = {4 << 20};
  r.nvml_devices = {{3, "NVIDIA H200", "GPU-5c1f", 150'000'000'000, -1}, {1, "NVIDIA H200", "GPU-77aa", -1, 205}};
  r.nvml = {{5, 0, 87, 40, 1980, 60'000'000'000, 512'000}, {5, 1, -1, -1, -1, -1, -1}, {105, 0, 90, 41, 1755, -1, 690'000}};
  r.nvml_interval_ns = 100'000'000;
  r.growing_graphs[0].kept = false;
  Experiment e;
  e.setting = "num_workers=2";
  e.state = ExperimentState::kMeasured;
  e.applied = "DataLoader(num_workers=2) at train.py:97 (the script passes 0)";
  e.note = "n";
  e.rounds = 2;
  e.warmup_steps = 3;
  e.baseline_ns = {40, 41};
  e.try_ns = {20};
  r.experiments = {e};
  ProcessInfo worker;
  worker.pid = 4242;
  worker.role = ProcessRole::kDataLoaderWorker;
  worker.worker_id = 1;
  worker.start_method = "fork";
  worker.wall_s = 3.5;
  worker.start_ns = 123'456'789;
  worker.top_functions = {"data.py:12(load)"};
  r.processes = {ProcessInfo{}, worker};
  return r;
}

// The sections in the order run_io.cc stores them.
const std::vector<std::string> kSectionNames = {
    "run", "environment", "threads", "python", "stacks", "ops", "strings", "timeline", "steps", "modules", "notes",
    "processes", "worker python", "worker ops", "samples", "python frames", "memory and gc", "nvml", "gpu window",
    "experiments", "rank"};

using test_support::kSpillHeaderBytes;
using test_support::resealed;
using test_support::spill_blocks;
using test_support::SpillBlock;

const SpillBlock& block_holding(const std::vector<SpillBlock>& blocks, size_t pos) {
  for (const SpillBlock& b : blocks)
    if (pos < b.at + run_io_detail::kBlockFrame + b.payload_bytes) return b;
  throw std::out_of_range("no block holds byte " + std::to_string(pos));
}

// Why BYTES are refused ("" when they are read).
std::string refusal(const std::string& bytes) {
  try {
    decode_run(bytes);
    return "";
  } catch (const std::runtime_error& e) {
    return e.what();
  }
}

std::string le_bytes(uint64_t v, size_t n) { return std::string(reinterpret_cast<const char*>(&v), n); }
std::string stored(const std::string& s) { return le_bytes(s.size(), 8) + s; }

TEST(RunIo, RoundTripKeepsEveryField) {
  // GIVEN a run with every field set
  const torchneck::Run before = full_run();
  // WHEN it is encoded and decoded
  const std::string bytes = encode_run(before);
  const torchneck::Run after = decode_run(bytes);
  // THEN encoding it again gives the same bytes, and what the analysis and
  // the JSON report see is the same
  EXPECT_EQ(encode_run(after), bytes);
  EXPECT_EQ(to_string(after.run.ending), "fatal signal SIGSEGV");
  EXPECT_EQ(after.env.dataloaders.at(0).created_at, "train.py:40");
  EXPECT_EQ(after.python.at(1).callers.at(0).calls, 4u);
  EXPECT_EQ(after.timeline.at(1).kind, OpKind::kBackward);
  EXPECT_EQ(after.module_events.at(0).is_exit, 1);
  EXPECT_FALSE(after.modules.at(1).compiled);
  EXPECT_EQ(after.modules.at(1).config, "in_features=8, out_features=10, bias=True");
  EXPECT_EQ(after.modules.at(1).trainable_params, 0);
  EXPECT_EQ(after.modules.at(0).trainable_params, -1);
  EXPECT_TRUE(after.modules.at(2).compiled);
  EXPECT_EQ(after.samples.at(1).stack, PySample::kNoStack);
  EXPECT_EQ(after.samples.at(0).t_ns, 40);
  EXPECT_EQ(after.samples.at(0).weight_ns, 5);
  EXPECT_EQ(after.samples.at(1).weight_ns, 7);
  EXPECT_EQ(after.dropped_samples, 6u);
  EXPECT_EQ(after.py_frames.at(0).end_ns, 30);
  EXPECT_EQ(after.py_frames.at(0).depth, 2u);
  EXPECT_EQ(after.dropped_py_frames, 8u);
  EXPECT_EQ(after.data_wait_ns, 5'000'000);
  EXPECT_EQ(after.processes.at(1).start_ns, 123'456'789);
  EXPECT_EQ(after.data_wait_cpu_ns, 1'250'000);
  EXPECT_EQ(after.data_wait_runqueue_ns, 750'000);
  ASSERT_EQ(after.step_clocks.size(), 2u);
  EXPECT_EQ(after.step_clocks[1].t_ns, 200);
  EXPECT_EQ(after.step_clocks[1].cpu_ns, 90);
  EXPECT_EQ(after.step_clocks[1].runqueue_ns, -1);
  EXPECT_EQ(after.step_clocks[1].thread_index, 1u);
  EXPECT_EQ(after.step_clocks[0].runqueue_ns, 5);
  EXPECT_EQ(after.step_clocks[0].step, 1u);
  EXPECT_EQ(after.step_clocks[0].data_ns, 30);
  EXPECT_EQ(after.step_clocks[1].step, 4096u);
  EXPECT_EQ(after.step_clocks[1].data_ns, 7000000000);
  EXPECT_EQ(after.memory.at(1).rss_bytes, 310 << 20);
  EXPECT_EQ(after.memory.at(1).torch_allocated_bytes, 123);
  EXPECT_EQ(after.memory.at(0).torch_allocated_bytes, -1);
  EXPECT_EQ(after.memory_interval_ns, 200'000'000);
  EXPECT_EQ(after.gc_pauses.at(0).generation, 2);
  EXPECT_EQ(after.gc_pauses.at(0).collected, 42);
  EXPECT_EQ(after.gc.by_generation[2], 2u);
  EXPECT_EQ(after.gc.ns_by_generation[1], 3);
  EXPECT_EQ(after.gc.dropped, 8u);
  EXPECT_TRUE(after.gc_observed);
  EXPECT_EQ(after.growing_graphs.at(0).code, "total_loss += loss");
  EXPECT_EQ(after.growing_graphs.at(0).line, 42);
  EXPECT_EQ(after.growing_graphs.at(0).step_last, 32);
  EXPECT_FALSE(after.growing_graphs.at(0).kept);
  ASSERT_EQ(after.experiments.size(), 1u);
  EXPECT_EQ(after.experiments[0].applied, "DataLoader(num_workers=2) at train.py:97 (the script passes 0)");
  EXPECT_EQ(after.experiments[0].warmup_steps, 3);
  EXPECT_EQ(after.experiments[0].baseline_ns, (std::vector<int64_t>{40, 41}));
  EXPECT_EQ(after.experiments[0].try_ns, (std::vector<int64_t>{20}));
  EXPECT_EQ(after.gpu_window.state, GpuWindowState::kRecorded);
  EXPECT_EQ(after.gpu_window.trace_path, "/out/gpu/kineto.trace.json");
  EXPECT_EQ(after.gpu_window.activities, (std::vector<std::string>{"cpu", "cuda"}));
  EXPECT_EQ(after.gpu_window.last_step, 9);
  EXPECT_EQ(after.gpu_window.clock_offset_ns, -1796115280594561046);
  EXPECT_EQ(after.gpu_window.alignment_residual_ns, 20);
  EXPECT_EQ(after.gpu_window.cuda_peak_reserved, std::vector<int64_t>{4 << 20});
  ASSERT_EQ(after.nvml_devices.size(), 2u);
  EXPECT_EQ(after.nvml_devices.at(0).nvml_index, 3);
  EXPECT_EQ(after.nvml_devices.at(0).uuid, "GPU-5c1f");
  EXPECT_EQ(after.nvml_devices.at(0).mem_total_bytes, 150'000'000'000);
  EXPECT_EQ(after.nvml_devices.at(1).lost_t_ns, 205);
  ASSERT_EQ(after.nvml.size(), 3u);
  EXPECT_EQ(after.nvml.at(1).device, 1u);
  EXPECT_EQ(after.nvml.at(1).gpu_util_pct, -1);
  EXPECT_EQ(after.nvml.at(2).sm_clock_mhz, 1755);
  EXPECT_EQ(after.nvml.at(2).mem_used_bytes, -1);
  EXPECT_EQ(after.nvml.at(2).power_mw, 690'000);
  EXPECT_EQ(after.nvml.at(0).mem_used_bytes, 60'000'000'000);
  EXPECT_EQ(after.nvml_interval_ns, 100'000'000);
  SummaryOptions o;
  EXPECT_EQ(profile_json(after, analyze(after, o)), profile_json(before, analyze(before, o)));
}

TEST(RunIo, TheSectionsAreStoredInTheirOrder) {
  const std::vector<SpillBlock> blocks = spill_blocks(encode_run(full_run()));
  ASSERT_FALSE(blocks.empty());
  EXPECT_EQ(blocks.back().section + 1, kSectionNames.size());
}

TEST(RunIo, EveryTruncationIsAnErrorWithAnOffset) {
  const std::string bytes = encode_run(full_run());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    const std::string m = refusal(bytes.substr(0, cut));
    EXPECT_EQ(m.rfind("byte ", 0), 0u) << "a file cut at byte " << cut << ": " << (m.empty() ? "accepted" : m);
  }
}

// Each kind of byte changed (the header's, a length, a name, a number, a
// block's frame): refused, naming the damaged block's section and first byte.
TEST(RunIo, ADamagedByteIsRefusedNamingItsSectionAndByte) {
  const std::string bytes = encode_run(full_run());
  const std::vector<SpillBlock> blocks = spill_blocks(bytes);
  const auto damaged_at = [&](size_t pos) {
    std::string b = bytes;
    b[pos] = static_cast<char>(b[pos] ^ 0x01);
    return refusal(b);
  };
  const auto expected = [&](size_t pos) {
    const SpillBlock& b = block_holding(blocks, pos);
    return "byte " + std::to_string(b.at) + ": section '" + kSectionNames.at(b.section) +
           "' is damaged (checksum mismatch)";
  };
  EXPECT_EQ(damaged_at(8), "byte 8: the header is damaged (checksum mismatch)");  // the version
  EXPECT_EQ(damaged_at(3), "byte 0: not a torchneck spill file (no spill header)");
  const size_t script_length = bytes.find(stored("train.py"));
  ASSERT_NE(script_length, std::string::npos);
  EXPECT_EQ(damaged_at(script_length), expected(script_length));
  EXPECT_EQ(kSectionNames.at(block_holding(blocks, script_length).section), "run");
  const size_t shapes = bytes.find("[[8, 8], [8, 8]] float,float");
  ASSERT_NE(shapes, std::string::npos);
  EXPECT_EQ(damaged_at(shapes + 3), expected(shapes + 3));
  EXPECT_EQ(kSectionNames.at(block_holding(blocks, shapes).section), "ops");
  const size_t data_wait_cpu = bytes.find(le_bytes(1'250'000, 8));
  ASSERT_NE(data_wait_cpu, std::string::npos);
  EXPECT_EQ(damaged_at(data_wait_cpu + 1), expected(data_wait_cpu + 1));
  EXPECT_EQ(kSectionNames.at(block_holding(blocks, data_wait_cpu).section), "steps");
  const SpillBlock& timeline = blocks.at(7);
  ASSERT_EQ(timeline.section, 7u);
  EXPECT_EQ(damaged_at(timeline.at + 5), expected(timeline.at + 5));  // the checksum itself
  // a block's length: past the end of the file, or past any block's length
  for (const auto& [word, why] : std::vector<std::pair<uint32_t, std::string>>{
           {static_cast<uint32_t>(run_io_detail::kMaxBlock),
            "is cut short or damaged (a block runs past the end of the file)"},
           {0x7fff0000u, "is damaged (a block length is out of range)"}}) {
    std::string b = bytes;
    std::memcpy(b.data() + timeline.at, &word, sizeof word);
    EXPECT_EQ(refusal(b), "byte " + std::to_string(timeline.at) + ": section 'timeline' " + why);
  }
}

TEST(RunIo, EveryChangedByteIsRefused) {
  // GIVEN a spill, WHEN any one of its bytes is changed (a bit, the top bit,
  // all bits) THEN it is refused, naming the header or the damaged block
  const std::string bytes = encode_run(full_run());
  const std::vector<SpillBlock> blocks = spill_blocks(bytes);
  for (size_t pos = 0; pos < bytes.size(); ++pos) {
    for (const int flip : {0x01, 0x80, 0xff}) {
      std::string b = bytes;
      b[pos] = static_cast<char>(b[pos] ^ flip);
      const std::string m = refusal(b);
      std::string start = pos < 8 ? "byte 0: " : "byte 8: ";
      if (pos >= kSpillHeaderBytes) {
        const SpillBlock& k = block_holding(blocks, pos);
        start = "byte " + std::to_string(k.at) + ": section '" + kSectionNames.at(k.section) + "' ";
      }
      EXPECT_EQ(m.rfind(start, 0), 0u) << "byte " << pos << " ^ " << flip << ": " << (m.empty() ? "accepted" : m);
    }
  }
}

TEST(RunIo, AnotherFormatVersionIsNamed) {
  const std::string magic = "TNKSPILL";
  // GIVEN the start of a version 13 spill (no header checksum: the script's
  // length follows the version)
  const std::string v13 = magic + le_bytes(13, 4) + stored("train.py");
  EXPECT_EQ(refusal(v13), "byte 8: spill format version 13 (an older torchneck's); this torchneck reads version 18");
  // and a newer version's header, whole
  std::string v19 = magic + le_bytes(19, 4);
  v19 += le_bytes(crc32(0L, reinterpret_cast<const Bytef*>(v19.data()), static_cast<uInt>(v19.size())), 4);
  EXPECT_EQ(refusal(v19), "byte 8: spill format version 19 (a newer torchneck's); this torchneck reads version 18");
  // but a version byte changed in this version's header is damage
  std::string b = encode_run(full_run());
  b[8] = 13;
  EXPECT_EQ(refusal(b), "byte 8: the header is damaged (checksum mismatch)");
}

TEST(RunIo, TheLayoutIsTheOneItsVersionNames) {
  // GIVEN the format as the sections' one declaration spells it out
  const std::string layout = run_io_detail::spill_layout();
  // THEN it has every section, in the framing's order
  size_t at = 0;
  for (const std::string& name : kSectionNames) {
    at = layout.find("\n" + name + ":", at);
    EXPECT_NE(at, std::string::npos) << "section '" << name << "' is not where it is stored";
  }
  // and it is the layout the version names: a field added, removed or
  // retyped without a new version fails here
  const uint32_t crc = crc32(0L, reinterpret_cast<const Bytef*>(layout.data()), static_cast<uInt>(layout.size()));
  EXPECT_EQ(crc, run_io_detail::kSpillLayoutCrc)
      << "the spill's fields changed (src/model/run_io_sections.cc): raise kSpillVersion and set kSpillLayoutCrc to 0x"
      << std::hex << crc << " (run_io_codec.h); the layout now:" << layout;
}

TEST(RunIo, ANameThatIsNotUtf8IsRefusedAndNeverWritten) {
  // GIVEN a spill whose operator name became invalid UTF-8 behind a right checksum
  const std::string bytes = encode_run(full_run());
  const size_t name = bytes.find(stored("aten::mm"));
  ASSERT_NE(name, std::string::npos);
  std::string b = bytes;
  b[name + 8 + 6] = static_cast<char>(0xff);
  // THEN it is refused, naming the string's first byte
  EXPECT_EQ(refusal(resealed(b)), "byte " + std::to_string(name + 8) + ": section 'ops': a name is not valid UTF-8");
  // AND a run whose thread name was cut mid-character is written with U+FFFD
  // in its place, and read back
  torchneck::Run r = full_run();
  r.threads[1].name = "pin_mem\xc3";
  const torchneck::Run back = decode_run(encode_run(r));
  EXPECT_EQ(back.threads[1].name, "pin_mem\xef\xbf\xbd");
}

TEST(RunIo, Utf8IsCheckedAsPythonDecodesIt) {
  for (const char* ok :
       {"", "plain", "h\xc3\xa9", "\xe2\x82\xac", "\xed\x9f\xbf", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf"})
    EXPECT_TRUE(run_io_detail::is_valid_utf8(ok)) << ok;
  // overlong forms, a surrogate, past U+10FFFF, a lone continuation, cut short
  for (const char* bad : {"\xc0\xaf", "\xe0\x80\xaf", "\xf0\x80\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80",
                          "ab\xe2\x82", "\xff"})
    EXPECT_FALSE(run_io_detail::is_valid_utf8(bad)) << bad;
}

TEST(RunIo, ACountPastItsSectionIsRefusedBehindARightChecksum) {
  // GIVEN the timeline's event count made huge, its checksum made right
  const torchneck::Run run = full_run();
  std::string b = encode_run(run);
  const SpillBlock& timeline = spill_blocks(b).at(7);
  const size_t count = timeline.at + run_io_detail::kBlockFrame;
  uint64_t n = 0;
  std::memcpy(&n, b.data() + count, sizeof n);
  ASSERT_EQ(n, run.timeline.size());
  b.replace(count, 8, le_bytes(uint64_t{1} << 60, 8));
  // THEN it is refused, not allocated
  EXPECT_EQ(refusal(resealed(b)),
            "byte " + std::to_string(count) + ": section 'timeline': a count is larger than the rest of the section");
}

TEST(RunIo, BytesAfterTheLastSectionAreRefused) {
  const std::string bytes = encode_run(full_run());
  EXPECT_EQ(refusal(bytes + "x"), "byte " + std::to_string(bytes.size()) + ": unexpected bytes after the last section");
}

TEST(RunIo, CorruptBytesNeverCrashOrAllocateWithoutBound) {
  // GIVEN random single-byte and multi-byte corruptions of a valid file,
  // half of them behind right checksums (the checks after the checksum)
  const std::string bytes = encode_run(full_run());
  std::vector<size_t> payload;  // positions of section bytes, not frames
  for (const SpillBlock& b : spill_blocks(bytes))
    for (size_t k = 0; k < b.payload_bytes; ++k) payload.push_back(b.at + run_io_detail::kBlockFrame + k);
  std::mt19937 rng(42);
  size_t rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string b = bytes;
    const bool reseal = i % 2 == 0;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k)
      b[reseal ? payload[rng() % payload.size()] : rng() % b.size()] = static_cast<char>(rng());
    // THEN decoding either fails cleanly or yields a run the analysis can read
    try {
      const torchneck::Run r = decode_run(reseal ? resealed(b) : b);
      SummaryOptions o;
      (void)profile_json(r, analyze(r, o));
    } catch (const std::runtime_error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0u);
}

TEST(RunIo, SaveAndLoadNameTheFile) {
  const std::string path = ::testing::TempDir() + "/torchneck_run_io_test.spill";
  save_run(full_run(), path);
  EXPECT_EQ(load_run(path).run.script, "train.py");
  try {
    load_run(path + ".missing");
    FAIL() << "a missing file was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(".missing"), std::string::npos);
  }
}

TEST(RunIo, OnlyARegularFileIsReadAndAFifoNeverBlocks) {
  // GIVEN a FIFO where the spill would be, with no writer
  const std::string fifo = ::testing::TempDir() + "/torchneck_run_io_fifo.spill";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // WHEN it is loaded
  auto loading = std::async(std::launch::async, [&fifo] {
    try {
      load_run(fifo);
      return std::string("accepted");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
  });
  if (loading.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // the blocked reader then reads its end
    if (writer >= 0) ::close(writer);
    ADD_FAILURE() << "reading a FIFO blocked";
  }
  // THEN it is refused, saying what it is
  EXPECT_EQ(loading.get(), fifo + ": not a regular file (a FIFO)");
  std::remove(fifo.c_str());
  // AND so is a folder
  try {
    load_run(::testing::TempDir());
    ADD_FAILURE() << "a folder was read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), ::testing::TempDir() + ": not a regular file (a folder)");
  }
}

// save_run writes the encoding in blocks as it goes: the file must be the
// same bytes as the encoding made whole, for a run many pieces long.
TEST(RunIo, SavedInPiecesIsTheWholeEncoding) {
  torchneck::Run big = full_run();
  for (int i = 0; i < 40000; ++i) {  // ~50 bytes an event: several 256 KB blocks
    OpEvent e = big.timeline.front();
    e.start_ns += i;
    e.end_ns += i;
    big.timeline.push_back(e);
  }
  const std::string bytes = encode_run(big);
  ASSERT_GT(bytes.size(), 4 * run_io_detail::kMaxBlock);
  const std::string path = ::testing::TempDir() + "/torchneck_run_io_pieces.spill";
  save_run(big, path);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  bool ok = false;
  const std::string saved = read_rest(f, &ok);
  std::fclose(f);
  std::remove(path.c_str());
  ASSERT_TRUE(ok);
  EXPECT_EQ(saved.size(), bytes.size());
  EXPECT_TRUE(saved == bytes);
}

}  // namespace
}  // namespace torchneck
