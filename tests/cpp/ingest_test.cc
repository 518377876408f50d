// Kineto trace ingest (src/ingest/kineto_json.h).
//
// Two kinds of checks:
//  - every real trace of ../shared/fixtures/kineto read a second time by an
//    independent parser (zlib + nlohmann::json, below), and the two readings
//    compared: event and category counts, kernel durations, flows, device
//    properties, distributedInfo, kernel launch arguments, correlation and
//    external ids, process names;
//  - hostile input (empty, truncated, corrupt, wrong schema, too deep, out of
//    range, invalid UTF-8, huge): each must be one std::runtime_error whose
//    message is "PATH: byte N: ..." or "PATH: event N: ...", never a crash,
//    a hang or another exception type.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ingest/kineto_json.h"
#include "ingest/trace_file.h"

#include <sys/stat.h>

namespace torchneck::kineto {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path fixture_dir() { return fs::path(TORCHNECK_SOURCE_DIR) / ".." / "shared" / "fixtures" / "kineto"; }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The fixture traces, by file name (not hta_expected.json, not .jsonl).
std::vector<std::string> fixture_traces() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fixture_dir(), ec)) {
    const std::string n = e.path().filename().string();
    if (ends_with(n, ".trace.json") || ends_with(n, ".trace.json.gz")) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The whole file, gunzipped when it is gzip (zlib's gzread passes plain
// files through). The oracle's own reader, not the one under test.
std::string gunzip_file(const fs::path& p) {
  gzFile f = gzopen(p.string().c_str(), "rb");
  if (f == nullptr) throw std::logic_error("cannot open " + p.string());
  std::string out;
  std::vector<char> buf(1 << 16);
  int n;
  while ((n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0) out.append(buf.data(), n);
  gzclose(f);
  if (n < 0) throw std::logic_error("bad gzip " + p.string());
  return out;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/torchneck_ingest_test_" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  return path;
}

// load_trace(path) on a thread, waited for at most `seconds`: a hang ends
// the test binary at once with a message (gtest has no timeout of its own and
// ctest's default is 25 minutes). Exceptions come back to the caller.
Trace load_bounded(const std::string& path, int seconds = 60, const ReadLimits& limits = {}) {
  auto done = std::make_shared<std::promise<Trace>>();
  std::future<Trace> result = done->get_future();
  std::thread([done, path, limits] {
    try {
      done->set_value(load_trace(path, {}, limits));
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  }).detach();
  if (result.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
    std::fprintf(stderr, "\nHANG: load_trace(\"%s\") still running after %d s\n", path.c_str(), seconds);
    std::fflush(stderr);
    std::_Exit(2);
  }
  return result.get();
}

// ---- the oracle's reading of a trace --------------------------------------

// The model's category names (kineto_trace.h), old capitalised names mapped.
std::string canonical_cat(const json& ev) {
  if (!ev.contains("cat") || !ev["cat"].is_string()) return "other";
  const std::string c = ev["cat"].get<std::string>();
  static const std::map<std::string, std::string> old = {
      {"Operator", "cpu_op"}, {"Kernel", "kernel"}, {"Runtime", "cuda_runtime"},
      {"Memcpy", "gpu_memcpy"}, {"Memset", "gpu_memset"}};
  static const std::set<std::string> current = {
      "cpu_op", "user_annotation", "gpu_user_annotation", "kernel", "gpu_memcpy", "gpu_memset",
      "cuda_runtime", "cuda_driver", "cuda_sync", "python_function", "Trace"};
  if (auto it = old.find(c); it != old.end()) return it->second;
  return current.count(c) ? c : "other";
}

// Microseconds to ns: exact for an integer, else the nearest to the double.
int64_t us_to_ns(const json& v) {
  if (v.is_number_integer()) return v.get<int64_t>() * 1000;
  return static_cast<int64_t>(std::llround(v.get<double>() * 1000.0));
}

const json* arg(const json& ev, const char* key) {
  auto a = ev.find("args");
  if (a == ev.end() || !a->is_object()) return nullptr;
  auto it = a->find(key);
  return it == a->end() || it->is_null() ? nullptr : &*it;
}

int64_t int_arg(const json& ev, const char* key) {
  const json* v = arg(ev, key);
  return v != nullptr && v->is_number_integer() ? v->get<int64_t>() : -1;
}

int64_t external_id(const json& ev) {
  const int64_t a = int_arg(ev, "External id");
  return a >= 0 ? a : int_arg(ev, "external id");
}

bool is_x(const json& ev) { return ev.is_object() && ev.value("ph", "") == "X"; }

// ---- every fixture, both readings ------------------------------------------

class IngestFixture : public ::testing::TestWithParam<std::string> {};

TEST(IngestFixtures, FolderHoldsTheTraces) {
  // The fixtures of ../shared/fixtures/: the comparison below must not
  // pass vacuously because the folder moved.
  EXPECT_GE(fixture_traces().size(), 12u) << fixture_dir();
}

TEST_P(IngestFixture, MatchesAnIndependentParser) {
  const fs::path file = fixture_dir() / GetParam();
  const json doc = json::parse(gunzip_file(file));
  const json& events = doc.at("traceEvents");
  const Trace t = load_trace(file.string());
  EXPECT_EQ(t.source, file.string());

  // Complete events, per category.
  std::map<std::string, size_t> want_cats, got_cats;
  size_t want_x = 0;
  for (const json& ev : events)
    if (is_x(ev)) ++want_x, ++want_cats[canonical_cat(ev)];
  for (const Event& e : t.events) ++got_cats[cat_name(e.cat)];
  EXPECT_EQ(t.events.size(), want_x);
  EXPECT_EQ(got_cats, want_cats);

  // Kernel durations: each within 1 ns of round(dur_us * 1000).
  std::vector<int64_t> want_dur, got_dur;
  for (const json& ev : events)
    if (is_x(ev) && canonical_cat(ev) == "kernel") want_dur.push_back(us_to_ns(ev.at("dur")));
  for (const Event& e : t.events)
    if (e.cat == Cat::kKernel) got_dur.push_back(e.dur_ns);
  std::sort(want_dur.begin(), want_dur.end());
  std::sort(got_dur.begin(), got_dur.end());
  ASSERT_EQ(got_dur.size(), want_dur.size());
  int64_t want_sum = 0, got_sum = 0;
  size_t off = 0;
  for (size_t i = 0; i < want_dur.size(); ++i) {
    want_sum += want_dur[i];
    got_sum += got_dur[i];
    if (std::llabs(got_dur[i] - want_dur[i]) > 1 && off++ < 5)
      ADD_FAILURE() << "kernel duration " << got_dur[i] << " ns, expected " << want_dur[i];
  }
  EXPECT_LE(std::llabs(got_sum - want_sum), static_cast<long long>(want_dur.size()))
      << "sum of kernel durations " << got_sum << " ns, expected " << want_sum;

  // Events come sorted by start, longer first on a tie (kineto_trace.h).
  for (size_t i = 1; i < t.events.size(); ++i) {
    const Event& a = t.events[i - 1];
    const Event& b = t.events[i];
    ASSERT_TRUE(a.ts_ns < b.ts_ns || (a.ts_ns == b.ts_ns && a.dur_ns >= b.dur_ns)) << "at " << i;
  }
  for (const Event& e : t.events) ASSERT_LT(e.name, t.names.size());

  // Flows, by phase and kind.
  size_t want_s = 0, want_f = 0, got_s = 0, got_f = 0;
  std::map<std::string, size_t> want_flow_cat;
  for (const json& ev : events) {
    if (!ev.is_object() || !ev.contains("id")) continue;
    const std::string ph = ev.value("ph", "");
    if (ph != "s" && ph != "f") continue;
    (ph == "s" ? want_s : want_f)++;
    ++want_flow_cat[ev.value("cat", "")];
  }
  for (const Flow& f : t.flows) (f.start ? got_s : got_f)++;
  EXPECT_EQ(got_s, want_s);
  EXPECT_EQ(got_f, want_f);
  size_t got_fwdbwd = 0;
  for (const Flow& f : t.flows) got_fwdbwd += f.cat == FlowCat::kFwdBwd;
  EXPECT_EQ(got_fwdbwd, want_flow_cat["fwdbwd"]);

  // deviceProperties.
  const json devs = doc.value("deviceProperties", json::array());
  ASSERT_EQ(t.devices.size(), devs.size());
  for (size_t i = 0; i < devs.size(); ++i) {
    SCOPED_TRACE("device " + std::to_string(i));
    const json& d = devs[i];
    const Device& g = t.devices[i];
    auto num = [&](const char* k) { return d.contains(k) ? d[k].get<int64_t>() : 0; };
    EXPECT_EQ(g.id, num("id"));
    EXPECT_EQ(g.name, d.value("name", ""));
    EXPECT_EQ(g.total_global_mem, num("totalGlobalMem"));
    EXPECT_EQ(g.compute_major, num("computeMajor"));
    EXPECT_EQ(g.compute_minor, num("computeMinor"));
    EXPECT_EQ(g.max_threads_per_block, num("maxThreadsPerBlock"));
    EXPECT_EQ(g.max_threads_per_sm, num("maxThreadsPerMultiprocessor"));
    EXPECT_EQ(g.regs_per_block, num("regsPerBlock"));
    EXPECT_EQ(g.regs_per_sm, num("regsPerMultiprocessor"));
    EXPECT_EQ(g.warp_size, num("warpSize"));
    EXPECT_EQ(g.shared_mem_per_block, num("sharedMemPerBlock"));
    EXPECT_EQ(g.shared_mem_per_sm, num("sharedMemPerMultiprocessor"));
    EXPECT_EQ(g.num_sms, num("numSms"));
  }

  // distributedInfo.
  const json dist = doc.value("distributedInfo", json::object());
  EXPECT_EQ(t.rank.rank, dist.value("rank", int64_t{-1}));
  EXPECT_EQ(t.rank.world_size, dist.value("world_size", int64_t{-1}));
  EXPECT_EQ(t.rank.backend, dist.value("backend", std::string()));

  // Correlation and external ids, as multisets per category.
  std::map<std::string, std::vector<int64_t>> want_corr, got_corr, want_ext, got_ext;
  for (const json& ev : events) {
    if (!is_x(ev)) continue;
    want_corr[canonical_cat(ev)].push_back(int_arg(ev, "correlation"));
    want_ext[canonical_cat(ev)].push_back(external_id(ev));
  }
  for (const Event& e : t.events) {
    got_corr[cat_name(e.cat)].push_back(e.correlation);
    got_ext[cat_name(e.cat)].push_back(e.external_id);
  }
  for (auto* m : {&want_corr, &got_corr, &want_ext, &got_ext})
    for (auto& [_, v] : *m) std::sort(v.begin(), v.end());
  EXPECT_EQ(got_corr, want_corr);
  EXPECT_EQ(got_ext, want_ext);

  // Kernel launch arguments: every kernel whose correlation is unique.
  std::map<int64_t, std::vector<const json*>> want_k;
  std::map<int64_t, std::vector<const Event*>> got_k;
  for (const json& ev : events)
    if (is_x(ev) && canonical_cat(ev) == "kernel") want_k[int_arg(ev, "correlation")].push_back(&ev);
  for (const Event& e : t.events)
    if (e.cat == Cat::kKernel) got_k[e.correlation].push_back(&e);
  size_t compared = 0, bad = 0;
  for (const auto& [corr, ws] : want_k) {
    if (corr < 0 || ws.size() != 1 || got_k[corr].size() != 1) continue;
    const json& w = *ws[0];
    const Event& g = *got_k[corr][0];
    ++compared;
    std::string diff;  // the fields that differ
    auto check = [&](bool same, const char* field) {
      if (!same) diff += std::string(diff.empty() ? "" : ", ") + field;
    };
    check(t.name_of(g) == w.value("name", ""), "name");
    // An integer ts is exact in ns. A fractional one is known here only to a
    // double's precision (0.25 us near 1.7e15 us, then x1000 rounded):
    // its exactness is tested on its own (IngestValid.Fractional...).
    check(std::llabs(g.ts_ns - us_to_ns(w.at("ts"))) <= (w.at("ts").is_number_integer() ? 0 : 256), "ts");
    check(std::llabs(g.dur_ns - us_to_ns(w.at("dur"))) <= 1, "dur");
    check(g.external_id == external_id(w), "external id");
    check(g.device == int_arg(w, "device"), "device");
    check(g.stream == int_arg(w, "stream"), "stream");
    check(g.registers_per_thread == int_arg(w, "registers per thread"), "registers per thread");
    check(g.shared_memory == int_arg(w, "shared memory"), "shared memory");
    for (const char* k : {"grid", "block"}) {
      const json* xs = arg(w, k);
      const int32_t* dst = std::string(k) == "grid" ? g.grid : g.block;
      bool same = true;  // absent (ROCm kernels): 0 0 0
      for (size_t i = 0; i < 3; ++i) same = same && dst[i] == (xs == nullptr ? 0 : (*xs).at(i).get<int32_t>());
      check(same, k);
    }
    const std::pair<const char*, double> reals[] = {{"blocks per SM", g.blocks_per_sm},
                                                    {"warps per SM", g.warps_per_sm},
                                                    {"est. achieved occupancy %", g.est_occupancy}};
    for (const auto& [k, got] : reals) {
      const json* v = arg(w, k);
      check(v == nullptr ? got == -1 : got == v->get<double>(), k);
    }
    if (!diff.empty() && bad++ < 5)
      ADD_FAILURE() << "kernel with correlation " << corr << ": " << diff << " differ: " << w.dump().substr(0, 600);
  }
  if (!want_k.empty()) {
    EXPECT_GT(compared, want_k.size() / 2) << "too few kernels with a unique correlation";
  }
  EXPECT_EQ(bad, 0u) << "of " << compared << " kernels";

  // Process names from "M" metadata (numeric pids).
  std::map<int64_t, std::string> want_pn;
  for (const json& ev : events)
    if (ev.is_object() && ev.value("ph", "") == "M" && ev.value("name", "") == "process_name" &&
        ev.contains("pid") && ev["pid"].is_number_integer())
      if (const json* n = arg(ev, "name"); n != nullptr && n->is_string())
        want_pn[ev["pid"].get<int64_t>()] = n->get<std::string>();
  for (const auto& [pid, name] : want_pn) {
    auto it = t.process_names.find(pid);
    ASSERT_NE(it, t.process_names.end()) << "pid " << pid;
    EXPECT_EQ(it->second, name) << "pid " << pid;
  }
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, IngestFixture, ::testing::ValuesIn(fixture_traces()), param_name);

// Facts about particular fixtures, read from the files.
TEST(IngestFixtures, OldCapitalisedCategoriesMapToCurrentOnes) {
  const Trace t = load_trace((fixture_dir() / "old_categories_inference.trace.json.gz").string());
  size_t kernels = 0, runtime = 0, other = 0;
  for (const Event& e : t.events) {
    kernels += e.cat == Cat::kKernel;
    runtime += e.cat == Cat::kRuntime;
    other += e.cat == Cat::kOther;
  }
  EXPECT_EQ(kernels, 4u);  // "cat": "Kernel" x4
  EXPECT_EQ(runtime, 8u);  // "cat": "Runtime" x8
  EXPECT_EQ(other, 0u);
}

TEST(IngestFixtures, StreamTidsAreNumeric) {
  // Old traces name GPU threads "stream 7"; the kernel's tid is its stream.
  const Trace t = load_trace((fixture_dir() / "v100_resnet50_num_workers_0.trace.json.gz").string());
  size_t kernels = 0;
  for (const Event& e : t.events) {
    if (e.cat != Cat::kKernel) continue;
    ++kernels;
    EXPECT_EQ(e.tid, e.stream);
    EXPECT_EQ(e.pid, e.device);
  }
  EXPECT_EQ(kernels, 8772u);
  ASSERT_EQ(t.devices.size(), 4u);
  EXPECT_EQ(t.devices[0].num_sms, 80);  // Tesla V100
}

TEST(IngestFixtures, ProgressReachesTheEndWithoutGoingBack) {
  std::vector<std::pair<size_t, size_t>> calls;
  const std::string path = (fixture_dir() / "a100_nccl_rank0_of2.trace.json.gz").string();
  const size_t text_size = gunzip_file(path).size();
  load_trace(path, [&](size_t done, size_t total) { calls.emplace_back(done, total); });
  ASSERT_FALSE(calls.empty());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, text_size);
    EXPECT_LE(calls[i].first, calls[i].second);
    if (i > 0) {
      EXPECT_GE(calls[i].first, calls[i - 1].first);
    }
  }
  EXPECT_EQ(calls.back().first, text_size);
}

// ---- small valid traces ------------------------------------------------------

TEST(IngestValid, EmptyEventListIsAnEmptyTrace) {
  const Trace t = load_bounded(write_temp("empty_list.json", R"({"traceEvents": []})"));
  EXPECT_TRUE(t.events.empty());
  EXPECT_TRUE(t.flows.empty());
  EXPECT_EQ(t.rank.rank, -1);
}

// kineto_trace.h: "Times are integer nanoseconds, read exactly from the JSON
// text". Values from the fixtures' own timestamps.
Trace one_kernel_at(const std::string& name, const std::string& ts, const std::string& dur) {
  return load_bounded(write_temp(name, R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, )"
                                     R"("tid": 7, "ts": )" + ts + R"(, "dur": )" + dur + "}]}"));
}

TEST(IngestValid, IntegerMicrosecondsAreExactNanoseconds) {
  // a100_event_sync, old_categories_inference, v100_resnet50: integer us.
  const std::pair<const char*, int64_t> cases[] = {{"1707417525512145", 1707417525512145000},
                                                   {"1665536373729077", 1665536373729077000},
                                                   {"1623142623531625", 1623142623531625000},
                                                   {"8999999999999999", 8999999999999999000}};
  for (const auto& [ts, ns] : cases) {
    const Trace t = one_kernel_at("int_ts.json", ts, "604");
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_EQ(t.events[0].ts_ns, ns) << ts;
    EXPECT_EQ(t.events[0].dur_ns, 604000);
  }
}

TEST(IngestValid, FractionalMicrosecondsAreExactNanoseconds) {
  // v100_resnet_rank0 ("ns resolution") and a100_nccl_rank0_of2.
  const std::pair<const char*, int64_t> cases[] = {{"1712195495519689.047", 1712195495519689047},
                                                   {"1712195495519695.812", 1712195495519695812},
                                                   {"4458676983543.183", 4458676983543183},
                                                   {"1712195495505583.0", 1712195495505583000}};
  for (const auto& [ts, ns] : cases) {
    const Trace t = one_kernel_at("frac_ts.json", ts, "4.928");
    ASSERT_EQ(t.events.size(), 1u);
    EXPECT_EQ(t.events[0].ts_ns, ns) << ts;
    EXPECT_EQ(t.events[0].dur_ns, 4928);
  }
}

TEST(IngestValid, TenMegabyteNameIsKept) {
  const std::string big(10u << 20, 'k');
  const std::string text = R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": ")" + big +
                           R"(", "pid": 0, "tid": 7, "ts": 5, "dur": 2}]})";
  const Trace t = load_bounded(write_temp("big_name.json", text));
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.name_of(t.events[0]), big);
  EXPECT_EQ(t.events[0].ts_ns, 5000);
  EXPECT_EQ(t.events[0].dur_ns, 2000);
}

TEST(IngestValid, GzipAndPlainReadTheSame) {
  // The same text, written plain and gzipped with zlib here.
  const std::string text = gunzip_file(fixture_dir() / "a100_event_sync.trace.json.gz");
  const std::string plain = write_temp("same.trace.json", text);
  const std::string gz = ::testing::TempDir() + "/torchneck_ingest_test_same.trace.json.gz";
  gzFile f = gzopen(gz.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(f);
  const Trace a = load_trace(plain), b = load_trace(gz);
  ASSERT_EQ(a.events.size(), b.events.size());
  ASSERT_GT(a.events.size(), 0u);
  for (size_t i = 0; i < a.events.size(); ++i) {
    EXPECT_EQ(a.events[i].ts_ns, b.events[i].ts_ns);
    EXPECT_EQ(a.name_of(a.events[i]), b.name_of(b.events[i]));
  }
}

// gzip of `text` in `members` members (zlib here).
std::string gzip_members(const std::string& text, int members) {
  std::string out;
  for (int m = 0; m < members; ++m) {
    const size_t from = text.size() * m / members, to = text.size() * (m + 1) / members;
    z_stream z{};
    EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    std::string buf(deflateBound(&z, to - from) + 64, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data() + from));
    z.avail_in = static_cast<uInt>(to - from);
    z.next_out = reinterpret_cast<Bytef*>(buf.data());
    z.avail_out = static_cast<uInt>(buf.size());
    EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    out.append(buf.data(), z.total_out);
    deflateEnd(&z);
  }
  return out;
}

// The text read on the helper thread, as it arrives, is the file's (plain
// or gunzipped), whole; what it cannot read in one go (a gzip of several
// members: ISA-L reads one) it says so, and load_trace reads it again.
TEST(IngestValid, ArrivingTextIsTheFilesText) {
  for (const char* name : {"a100_event_sync.trace.json.gz", "v100_resnet_rank0.trace.json.gz"}) {
    const std::string path = (fixture_dir() / name).string();
    const std::string text = gunzip_file(path);
    std::unique_ptr<detail::ArrivingText> a = detail::ArrivingText::open(path);
    ASSERT_NE(a, nullptr) << name;
    ASSERT_EQ(a->text().size(), text.size()) << name;
    size_t there = 0;
    for (size_t want = 1; want <= text.size(); want += 1 << 16) {
      const size_t got = a->wait(want);
      ASSERT_GE(got, want) << name;
      ASSERT_GE(got, there) << name;  // never goes back
      there = got;
    }
    EXPECT_TRUE(a->finish()) << name;
    EXPECT_EQ(a->wait(text.size()), text.size());
    EXPECT_TRUE(std::string_view(a->text().data(), a->text().size()) == text) << name;
  }
  const std::string text = gunzip_file(fixture_dir() / "a100_event_sync.trace.json.gz");
  const std::string plain = write_temp("arriving.trace.json", text);
  std::unique_ptr<detail::ArrivingText> p = detail::ArrivingText::open(plain);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->finish());
  EXPECT_TRUE(std::string_view(p->text().data(), p->text().size()) == text);
  // Three members: the helper stops after the first; load_trace still reads
  // all of it (zlib), the same as the plain file.
  const std::string three = write_temp("arriving_three.trace.json.gz", gzip_members(text, 3));
  std::unique_ptr<detail::ArrivingText> m = detail::ArrivingText::open(three);
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->finish());
  m.reset();
  const Trace a = load_trace(plain), b = load_trace(three);
  ASSERT_GT(a.events.size(), 0u);
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) {
    EXPECT_EQ(a.events[i].ts_ns, b.events[i].ts_ns);
    EXPECT_EQ(a.events[i].dur_ns, b.events[i].dur_ns);
    EXPECT_EQ(a.name_of(a.events[i]), b.name_of(b.events[i]));
  }
  // Dropped before it is done (an error elsewhere): the helper stops.
  for (int i = 0; i < 5; ++i) {
    std::unique_ptr<detail::ArrivingText> d = detail::ArrivingText::open((fixture_dir() / "v100_resnet_rank0.trace.json.gz").string());
    ASSERT_NE(d, nullptr);
    if (i % 2 == 1) d->wait(1);
  }
}

TEST(IngestValid, TraceFilesOfAFolderAreTheJsonFilesSorted) {
  const fs::path dir = fs::path(::testing::TempDir()) / "torchneck_ingest_test_run";
  fs::remove_all(dir);
  fs::create_directories(dir / "sub.json");  // a folder, not a trace
  for (const char* n : {"rank1.json.gz", "rank0.json", "notes.txt", "rank0.json.bak"})
    std::ofstream(dir / n) << "{}";
  const std::vector<std::string> got = trace_files(dir.string());
  EXPECT_EQ(got, (std::vector<std::string>{(dir / "rank0.json").string(), (dir / "rank1.json.gz").string()}));
  EXPECT_EQ(trace_files((dir / "rank0.json").string()), std::vector<std::string>{(dir / "rank0.json").string()});
  EXPECT_THROW(trace_files((dir / "missing").string()), std::runtime_error);
  fs::remove_all(dir / "sub.json");
  fs::remove(dir / "rank0.json");
  fs::remove(dir / "rank1.json.gz");
  EXPECT_THROW(trace_files(dir.string()), std::runtime_error);
  fs::remove_all(dir);
}

// ---- hostile input -----------------------------------------------------------

enum class Where { kByte, kEvent, kEither };

// load_trace(path) must throw one std::runtime_error "PATH: byte N: ..." (or
// "event N"), with N at most max_n. Any other exception fails the test.
void expect_rejected(const std::string& path, Where where, size_t max_n = SIZE_MAX) {
  SCOPED_TRACE(path);
  try {
    const Trace t = load_bounded(path);
    ADD_FAILURE() << "accepted, " << t.events.size() << " events";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    ASSERT_EQ(m.rfind(path + ": ", 0), 0u) << m;
    const std::string rest = m.substr(path.size() + 2);
    const bool byte = rest.rfind("byte ", 0) == 0, event = rest.rfind("event ", 0) == 0;
    const bool right = where == Where::kByte ? byte : where == Where::kEvent ? event : byte || event;
    EXPECT_TRUE(right) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m;
    if (byte || event) {
      const size_t at = rest.find(' ') + 1;
      size_t used = 0;
      const unsigned long long n = std::stoull(rest.substr(at), &used);
      EXPECT_GT(used, 0u);
      EXPECT_EQ(rest.compare(at + used, 2, ": "), 0) << m;
      EXPECT_LE(n, max_n) << m;
    }
  }
}

void expect_text_rejected(const std::string& name, const std::string& text, Where where) {
  expect_rejected(write_temp(name, text), where, where == Where::kByte ? text.size() : SIZE_MAX);
}

// A valid one-event trace around `event`, for the schema cases.
std::string one_event(const std::string& event) { return R"({"traceEvents": [)" + event + "]}"; }

TEST(IngestRejects, MissingFile) {
  const std::string path = ::testing::TempDir() + "/torchneck_ingest_test_no_such_file.json";
  std::remove(path.c_str());
  try {
    load_trace(path);
    ADD_FAILURE() << "accepted a missing file";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
}

TEST(IngestRejects, EmptyAndBlank) {
  expect_text_rejected("empty.json", "", Where::kByte);
  expect_text_rejected("blank.json", " \n\t\r\n  ", Where::kByte);
}

TEST(IngestRejects, NotJson) {
  expect_text_rejected("text.json", "this is not a trace\n", Where::kByte);
  expect_text_rejected("binary.json", std::string("\x00\x01\x02\xff{", 5), Where::kByte);
  expect_text_rejected("trailing_garbage.json", R"({"traceEvents": []} xyz)", Where::kByte);
  expect_text_rejected("trailing_comma.json", R"({"traceEvents": [{"ph": "i"},]})", Where::kByte);
  expect_text_rejected("single_quotes.json", R"({'traceEvents': []})", Where::kByte);
  expect_text_rejected("two_docs.json", R"({"traceEvents": []}{"traceEvents": []})", Where::kByte);
}

TEST(IngestRejects, TruncatedJson) {
  const std::string text = gunzip_file(fixture_dir() / "a100_event_sync.trace.json.gz");
  const size_t last = text.rfind('}');
  ASSERT_NE(last, std::string::npos);
  for (size_t cut : {size_t{1}, size_t{2}, size_t{17}, size_t{100}, size_t{1000}, text.size() / 3, text.size() / 2,
                     last - 1, last}) {
    const std::string part = text.substr(0, cut);
    expect_rejected(write_temp("cut_" + std::to_string(cut) + ".json", part), Where::kByte, part.size());
  }
}

TEST(IngestRejects, TruncatedGzip) {
  const std::string gz = read_bytes(fixture_dir() / "a100_event_sync.trace.json.gz");
  ASSERT_GT(gz.size(), 100u);
  for (size_t cut : {size_t{2}, size_t{10}, size_t{30}, gz.size() / 2, gz.size() - 8, gz.size() - 4, gz.size() - 1})
    expect_rejected(write_temp("cut_" + std::to_string(cut) + ".json.gz", gz.substr(0, cut)), Where::kByte);
}

TEST(IngestRejects, CorruptGzip) {
  const std::string gz = read_bytes(fixture_dir() / "a100_event_sync.trace.json.gz");
  // Inside the deflate data, then in the CRC-32 and the length trailer.
  for (size_t at : {gz.size() / 4, gz.size() / 2, gz.size() * 3 / 4, gz.size() - 7, gz.size() - 2}) {
    std::string bad = gz;
    bad[at] = static_cast<char>(bad[at] ^ 0xFF);
    expect_rejected(write_temp("flip_" + std::to_string(at) + ".json.gz", bad), Where::kByte);
  }
  std::string zeros = gz;
  std::fill(zeros.begin() + 40, zeros.begin() + 140, '\0');
  expect_rejected(write_temp("zeros.json.gz", zeros), Where::kByte);
  // A gzip member that holds non-JSON.
  const std::string gzpath = ::testing::TempDir() + "/torchneck_ingest_test_text.json.gz";
  gzFile f = gzopen(gzpath.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzputs(f, "plain words, gzipped\n");
  gzclose(f);
  expect_rejected(gzpath, Where::kByte);
}

TEST(IngestRejects, WrongSchema) {
  const char* x = R"("ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7)";
  expect_text_rejected("top_array.json", R"([{"ph": "X", "ts": 1, "dur": 1}])", Where::kEvent);
  // Valid JSON, but neither an object nor an array: refused at its first byte.
  expect_text_rejected("top_number.json", "42", Where::kByte);
  expect_text_rejected("top_string.json", R"("traceEvents")", Where::kByte);
  expect_text_rejected("no_events.json", R"({"schemaVersion": 1, "deviceProperties": []})", Where::kEvent);
  expect_text_rejected("events_object.json", R"({"traceEvents": {"ph": "X"}})", Where::kEvent);
  expect_text_rejected("events_number.json", R"({"traceEvents": 5})", Where::kEvent);
  expect_text_rejected("events_null.json", R"({"traceEvents": null})", Where::kEvent);
  expect_text_rejected("event_number.json", one_event("1"), Where::kEvent);
  expect_text_rejected("event_array.json", one_event("[]"), Where::kEvent);
  expect_text_rejected("x_without_ts.json", one_event("{" + std::string(x) + R"(, "dur": 3})"), Where::kEvent);
  expect_text_rejected("negative_dur.json", one_event("{" + std::string(x) + R"(, "ts": 10, "dur": -3})"),
                       Where::kEvent);
  expect_text_rejected("string_ts.json", one_event("{" + std::string(x) + R"(, "ts": "10", "dur": 3})"),
                       Where::kEvent);
  expect_text_rejected("ph_number.json", one_event(R"({"ph": 88, "ts": 1, "dur": 1})"), Where::kEvent);
  // Times that are not numbers (a scan of the text must not lose its way).
  int i = 0;
  for (const char* v : {R"({"a": 1})", R"({"x": [1]})", "[1, 2]", "[]", R"("1 ]")", R"("}")", "true", "null"}) {
    const std::string n = std::to_string(i++);
    expect_text_rejected("odd_dur_" + n + ".json", one_event("{" + std::string(x) + R"(, "ts": 1, "dur": )" + v + "}"),
                         Where::kEvent);
    expect_text_rejected("odd_ts_" + n + ".json", one_event("{" + std::string(x) + R"(, "ts": )" + v + R"(, "dur": 1})"),
                         Where::kEvent);
  }
  // The bad event after good ones.
  expect_text_rejected("late_bad.json",
                       R"({"traceEvents": [{)" + std::string(x) + R"(, "ts": 1, "dur": 1}, {)" + x +
                           R"(, "ts": 2, "dur": 1}, 7]})",
                       Where::kEvent);
}

TEST(IngestRejects, DeepNesting) {
  const size_t n = 100000;
  expect_text_rejected("deep_arrays.json", std::string(n, '[') + std::string(n, ']'), Where::kEither);
  expect_text_rejected("deep_arrays_open.json", std::string(n, '['), Where::kByte);
  std::string objects;
  for (size_t i = 0; i < n; ++i) objects += R"({"a":)";
  expect_text_rejected("deep_objects.json", objects + "1" + std::string(n, '}'), Where::kEither);
  expect_text_rejected("deep_in_args.json",
                       one_event(R"({"ph": "X", "ts": 1, "dur": 1, "args": {"x": )" + std::string(n, '[') +
                                 std::string(n, ']') + "}}"),
                       Where::kEither);
}

TEST(IngestRejects, HugeNumbers) {
  const std::string x = R"("ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7)";
  const std::pair<const char*, const char*> cases[] = {
      {"ts_1e400", R"("ts": 1e400, "dur": 1)"},
      {"ts_bigint", R"("ts": 99999999999999999999999, "dur": 1)"},
      {"ts_minus_bigint", R"("ts": -99999999999999999999999, "dur": 1)"},
      {"ts_1e300", R"("ts": 1e300, "dur": 1)"},
      {"ts_minus_1e300", R"("ts": -1e300, "dur": 1)"},
      {"dur_1e400", R"("ts": 1, "dur": 1e400)"},
      {"dur_bigint", R"("ts": 1, "dur": 99999999999999999999999)"},
      {"corr_1e400", R"("ts": 1, "dur": 1, "args": {"correlation": 1e400})"},
      {"corr_1e300", R"("ts": 1, "dur": 1, "args": {"correlation": 1e300})"},
      {"pid_bigint", R"("ts": 1, "dur": 1, "pid": 99999999999999999999999)"},
      {"occupancy_1e400", R"("ts": 1, "dur": 1, "args": {"est. achieved occupancy %": 1e400})"},
  };
  for (const auto& [name, fields] : cases)
    expect_text_rejected(std::string(name) + ".json", one_event("{" + x + ", " + fields + "}"), Where::kEither);
  // Out of range in the metadata around a valid events array.
  const std::string events = R"("traceEvents": [{)" + x + R"(, "ts": 1, "dur": 1}, {)" + x + R"(, "ts": 2, "dur": 1}])";
  expect_text_rejected("device_mem_1e300.json",
                       R"({"deviceProperties": [{"id": 0, "totalGlobalMem": 1e300, "numSms": 80}], )" + events + "}",
                       Where::kEither);
  expect_text_rejected("device_mem_after.json",
                       "{" + events + R"(, "deviceProperties": [{"id": 0, "totalGlobalMem": 3.8e24}]})", Where::kEither);
  expect_text_rejected("rank_1e300.json", "{" + events + R"(, "distributedInfo": {"rank": 1e300}})", Where::kEither);
}

TEST(IngestRejects, EndsThatDoNotFitInNanoseconds) {
  // Event::end_ns() is ts_ns + dur_ns in int64: an accepted event must have
  // an end that fits (else every analysis that takes an end overflows).
  const std::string x = R"("ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7)";
  const std::pair<const char*, const char*> cases[] = {
      {"end_9e15_9e15", R"("ts": 9000000000000000, "dur": 9000000000000000)"},
      {"end_9e15_frac", R"("ts": 8999999999999999.999, "dur": 8999999999999999.999)"},
      {"end_max", R"("ts": 9223372036854775, "dur": 1)"},
  };
  for (const auto& [name, fields] : cases) {
    const std::string path = write_temp(std::string(name) + ".json", one_event("{" + x + ", " + fields + "}"));
    try {
      const Trace t = load_bounded(path);
      for (const Event& e : t.events)
        EXPECT_LE(e.ts_ns, INT64_MAX - e.dur_ns) << name << ": accepted, and ts_ns + dur_ns overflows";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": event ", 0), 0u) << e.what();
    }
  }
}

TEST(IngestRejects, NanLikeTokens) {
  const std::string x = R"("ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 1, )";
  int i = 0;
  for (const char* tok : {"NaN", "nan", "Infinity", "-Infinity", "inf", "1e", "01", ".5", "+1", "0x10", "1.", "-"})
    expect_text_rejected("nan_" + std::to_string(i++) + ".json", one_event("{" + x + "\"ts\": " + tok + "}"),
                         Where::kByte);
}

TEST(IngestRejects, InvalidUtf8InAName) {
  int i = 0;
  for (const char* bad : {"\xff", "\xfe\xfe", "k\xe2\x82", "\xc0\xaf", "\xed\xa0\x80", "\xf8\x88\x80\x80\x80"}) {
    const std::string text = one_event(R"({"ph": "X", "cat": "kernel", "name": ")" + std::string(bad) +
                                       R"(", "pid": 0, "tid": 7, "ts": 1, "dur": 1})");
    expect_text_rejected("utf8_" + std::to_string(i++) + ".json", text, Where::kByte);
  }
}

TEST(IngestRejects, TenMegabyteUnterminatedString) {
  const std::string text = R"({"traceEvents": [{"ph": "X", "name": ")" + std::string(10u << 20, 'k');
  expect_text_rejected("big_open_string.json", text, Where::kByte);
}

// Past the first megabytes of a large trace the text already read is given
// back while the events are read (BigBytes::release); a fault found there is
// still placed exactly, at the byte planted.
TEST(IngestRejects, FaultLateInALargeTraceIsPlacedExactly) {
  const std::string text = gunzip_file(fixture_dir() / "v100_resnet_rank0.trace.json.gz");
  ASSERT_GT(text.size(), 12u << 20);
  for (double where : {0.6, 0.97}) {
    std::string bad = text;
    const size_t at = bad.find("\"dur\": ", static_cast<size_t>(static_cast<double>(bad.size()) * where));
    ASSERT_NE(at, std::string::npos);
    const size_t value = at + 7;
    ASSERT_TRUE(bad[value] >= '0' && bad[value] <= '9') << bad.substr(at, 20);
    bad[value] = 'x';  // "dur": x23 -- not a JSON value
    const std::string path = write_temp("late_fault_" + std::to_string(value) + ".json", bad);
    try {
      load_trace(path);
      ADD_FAILURE() << "accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": byte " + std::to_string(value) + ": not valid JSON", 0), 0u)
          << e.what() << " (planted at " << value << ")";
    }
  }
}

TEST(IngestRejects, ParseTraceNamesThePathItIsGiven) {
  // The in-memory entry (the fuzz target's) reports the name it is given.
  for (const std::string& text : {std::string(), std::string("{"), std::string("[1]")}) {
    try {
      parse_trace(text, "memory:trace");
      ADD_FAILURE() << "accepted " << text;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("memory:trace: ", 0), 0u) << e.what();
    }
  }
}

// ---- bounded reading ---------------------------------------------------------
// Only a regular file is read, and its text is held to ReadLimits and to
// TextBounds as it arrives: a bomb or a text too large fails early, in one line.

// The one line load_trace(path) throws (the test fails if it reads the file).
std::string refusal_of(const std::string& path, const ReadLimits& limits = {}, int seconds = 60) {
  try {
    const Trace t = load_bounded(path, seconds, limits);
    ADD_FAILURE() << path << " accepted, " << t.events.size() << " events";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

// A gzip (zlib, at `level`) of `head` followed by `fill` up to `total` bytes.
std::string gzip_filled(const std::string& head, char fill, size_t total, int level) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  const std::string chunk(size_t{1} << 20, fill);
  std::string out, buf(size_t{1} << 20, '\0');
  size_t fed = 0;
  int rc = Z_OK;
  for (bool first = true; rc != Z_STREAM_END; first = false) {
    const std::string& piece = first ? head : chunk;
    const size_t n = std::min(piece.size(), total - fed);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(piece.data()));
    z.avail_in = static_cast<uInt>(n);
    fed += n;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf.data());
      z.avail_out = static_cast<uInt>(buf.size());
      rc = deflate(&z, fed == total ? Z_FINISH : Z_NO_FLUSH);
      out.append(buf.data(), buf.size() - z.avail_out);
    } while (z.avail_out == 0 || (fed == total && rc != Z_STREAM_END));
  }
  deflateEnd(&z);
  return out;
}

// The MiB the ratio refusal says were gunzipped: "... times its size (8.2 MiB from ...".
double gunzipped_mib(const std::string& refusal) {
  const size_t at = refusal.find("times its size (");
  if (at == std::string::npos) return -1;
  size_t used = 0;
  const double v = std::stod(refusal.substr(at + 16), &used);
  return refusal.compare(at + 16 + used, 4, " MiB") == 0 ? v : -1;
}

TEST(IngestBounds, OnlyARegularFileIsRead) {
  // A FIFO's open waits for a writer and its reading may never end: refused
  // at once, nothing written to it.
  const std::string fifo = ::testing::TempDir() + "/torchneck_ingest_test_fifo.json";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(refusal_of(fifo, {}, 20), fifo + ": not a regular file (a FIFO)");
  try {
    trace_files(fifo);
    ADD_FAILURE() << "listed a FIFO";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), fifo + ": not a regular file (a FIFO)");
  }
  std::remove(fifo.c_str());
  EXPECT_EQ(refusal_of("/dev/null"), "/dev/null: not a regular file (a character device)");
  const std::string folder = ::testing::TempDir() + "/torchneck_ingest_test_folder.json";
  fs::create_directories(folder);
  EXPECT_EQ(refusal_of(folder), folder + ": not a regular file (a folder)");
  fs::remove_all(folder);
}

TEST(IngestBounds, GzipBombIsRefusedEarly) {
  const size_t bomb = size_t{64} << 20;
  for (int level : {1, 9}) {  // zeros gzip 229 times at level 1, 1030 at 9
    SCOPED_TRACE(level);
    // Not JSON: refused at its first byte, whatever follows.
    const std::string name = std::to_string(level) + ".json.gz";
    const std::string zeros = write_temp("zeros_" + name, gzip_filled("", '\0', bomb, level));
    EXPECT_EQ(refusal_of(zeros), zeros + ": byte 0: not a JSON trace (starts with 0x00)");
    // An opening brace, then blanks: refused by the ratio after its first
    // MiB, not the whole gunzipped (nor the size limit, far above it).
    const std::string blanks = write_temp("blanks_" + name, gzip_filled("{", ' ', bomb, level));
    const std::string m = refusal_of(blanks);
    EXPECT_EQ(m.rfind(blanks + ": gunzips to over 200 times its size (", 0), 0u) << m;
    EXPECT_NE(m.find("gunzip it and give the .json"), std::string::npos) << m;
    const double mib = gunzipped_mib(m);
    EXPECT_GE(mib, 8.0) << m;
    EXPECT_LE(mib, 9.0) << m;  // the ratio is checked every 256 KB past 8 MiB
    // With a lower limit, the limit is hit first.
    ReadLimits small;
    small.max_text = size_t{4} << 20;
    EXPECT_EQ(refusal_of(blanks, small), blanks +
              ": the trace is larger than 4 MiB gunzipped, the limit of --max-trace-size (by default half of this "
              "machine's memory, as the whole text is held while it is read); --max-trace-size=SIZE raises it");
  }
}

// A text gunzipped on the helper thread is checked on its first piece: not
// JSON, and the helper stops there, not after the whole.
TEST(IngestBounds, ArrivingTextStopsAtItsFirstPiece) {
  std::string lines;
  for (size_t i = 0; lines.size() < (size_t{32} << 20); ++i)
    lines += "line " + std::to_string(i * 7919 % 100003) + " of a log\n";
  const std::string gz = gzip_members(lines, 1);
  ASSERT_LT(lines.size(), gz.size() * detail::TextBounds::kMaxGzipRatio);  // not a bomb by its ratio: the helper's
  const std::string path = write_temp("log.json.gz", gz);
  std::unique_ptr<detail::ArrivingText> a = detail::ArrivingText::open(path);
  ASSERT_NE(a, nullptr);
  EXPECT_FALSE(a->finish());
  EXPECT_EQ(a->refusal(), path + ": byte 0: not a JSON trace (starts with 'l')");
  EXPECT_LE(a->wait(lines.size()), size_t{1} << 20);  // what it had gunzipped when it stopped
  a.reset();
  EXPECT_EQ(refusal_of(path), path + ": byte 0: not a JSON trace (starts with 'l')");
}

TEST(IngestBounds, TextOverTheLimitIsRefusedNamingTheOption) {
  const std::string text = gunzip_file(fixture_dir() / "a100_event_sync.trace.json.gz");
  const std::string plain = write_temp("limit.trace.json", text);
  const std::string one = write_temp("limit_one.trace.json.gz", gzip_members(text, 1));
  // Three members: the trailer states the last one's size, under the limit.
  const std::string three = write_temp("limit_three.trace.json.gz", gzip_members(text, 3));
  ReadLimits limits;
  limits.max_text = text.size() - 1;
  const std::string why = ", the limit of --max-trace-size (by default half of this machine's memory, as the "
                          "whole text is held while it is read); --max-trace-size=SIZE raises it";
  for (const std::string& path : {plain, one, three}) {
    const std::string m = refusal_of(path, limits);
    EXPECT_EQ(m.rfind(path + ": the trace is larger than ", 0), 0u) << m;
    const std::string end = (path == plain ? "" : " gunzipped") + why;
    EXPECT_TRUE(m.size() > end.size() && m.compare(m.size() - end.size(), end.size(), end) == 0) << m;
  }
  // At the limit: read, as without one.
  limits.max_text = text.size();
  const Trace whole = load_trace(plain);
  ASSERT_GT(whole.events.size(), 0u);
  for (const std::string& path : {plain, one, three}) {
    const Trace t = load_bounded(path, 60, limits);
    EXPECT_EQ(t.events.size(), whole.events.size()) << path;
  }
}

// read_trace_file (zlib, in pieces, into a buffer that grows) gives every
// fixture's text as the oracle's gunzip does, and a large gzip of several
// members too (its trailer states a third of its size).
TEST(IngestBounds, ReadInPiecesIsTheWholeText) {
  for (const std::string& name : fixture_traces()) {
    const std::string path = (fixture_dir() / name).string();
    const BigBytes t = detail::read_trace_file(path);
    EXPECT_TRUE(std::string_view(t.data(), t.size()) == gunzip_file(path)) << name;
  }
  const std::string text = gunzip_file(fixture_dir() / "v100_resnet_rank0.trace.json.gz");
  const std::string three = write_temp("large_three.trace.json.gz", gzip_members(text, 3));
  const BigBytes t = detail::read_trace_file(three);
  EXPECT_TRUE(std::string_view(t.data(), t.size()) == text);
  EXPECT_EQ(std::string(t.data() + t.size(), t.padding()), std::string(t.padding(), '\0'));
}

}  // namespace
}  // namespace torchneck::kineto
