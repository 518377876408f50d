// `torchneck analyze [-o DIR] [--top N] PATH`: the report of a torch.profiler
// (Kineto) trace, or of a folder of rank traces, without Python or torch:
// the same kind of report as a live run (verdict first) and profile.json in
// the same schema, plus its "gpu" section (and "ranks" for several).
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <future>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "analyze/analysis.h"
#include "core/timing.h"
#include "ingest/kineto_json.h"
#include "ingest/kineto_to_run.h"
#include "report/output_files.h"

namespace {

using namespace torchneck;

constexpr const char* kUsage =
    "usage: torchneck analyze [-o DIR] [--top=N] [--trace-steps=N] TRACE\n"
    "\n"
    "Reports the bottleneck of a torch.profiler (Kineto) trace: TRACE is a .json or .json.gz file\n"
    "(export_chrome_trace, tensorboard_trace_handler), or a folder of them, one per rank.\n"
    "Prints the report and writes DIR/profile.json and DIR/report.txt (default DIR: a new folder\n"
    "under ./torchneck-out/), and DIR/trace.json, a timeline of the first steps (--trace-steps=N steady\n"
    "steps, default 5; 0: all) for https://ui.perfetto.dev or chrome://tracing.\n";

struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::string path, out;
  size_t top = 15;
  int64_t trace_steps = kDefaultTraceSteps;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&](const std::string& name) {
      const size_t eq = s.find('=');
      if (eq != std::string::npos) return s.substr(eq + 1);
      if (i + 1 >= argc) throw Usage(name + " needs a value");
      return std::string(argv[++i]);
    };
    if (s == "-h" || s == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (s == "-o" || s.rfind("--output", 0) == 0) {
      a.out = value(s == "-o" ? "-o" : "--output");
      if (a.out.empty()) throw Usage("-o needs a folder name");
    } else if (s.rfind("--top", 0) == 0) {
      const std::string v = value("--top");
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 1000) throw Usage("--top must be an integer between 1 and 1000, not '" + v + "'");
      a.top = static_cast<size_t>(n);
    } else if (s.rfind("--trace-steps", 0) == 0) {
      const std::string v = value("--trace-steps");
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0 || n > 1000000) throw Usage("--trace-steps must be an integer between 0 and 1000000, not '" + v + "'");
      a.trace_steps = n;
    } else if (!s.empty() && s[0] == '-' && s != "-") {
      throw Usage("unknown option " + s + " (see torchneck analyze --help)");
    } else if (a.path.empty()) {
      a.path = s;
    } else {
      throw Usage("analyze takes one trace file or folder, not also '" + s + "'");
    }
  }
  if (a.path.empty()) throw Usage("no trace given (usage: torchneck analyze [-o DIR] TRACE)");
  return a;
}

std::string default_dir(const std::string& path) {
  std::string stem = std::filesystem::path(path).filename().string();
  for (const char* ext : {".gz", ".json", ".trace", ".pt"}) {
    const std::string e = ext;
    if (stem.size() > e.size() && stem.compare(stem.size() - e.size(), e.size(), e) == 0) stem.resize(stem.size() - e.size());
  }
  if (stem.empty()) stem = "trace";
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  std::string base = "torchneck-out/" + stem + "-" + stamp;
  std::string dir = base;
  for (int n = 2; std::filesystem::exists(dir); ++n) dir = base + "-" + std::to_string(n);
  return dir;
}

// Creates the folder (and its parents) and checks it can be written, before
// any work; returns the folders it created, for removal on failure.
std::vector<std::string> prepare_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> created;
  fs::path p;
  for (const auto& part : fs::path(dir)) {
    p /= part;
    std::error_code ec;
    if (fs::exists(p, ec)) {
      if (!fs::is_directory(p, ec)) throw Usage("cannot write the report to " + dir + ": " + p.string() + " is not a folder");
      continue;
    }
    if (!fs::create_directory(p, ec)) throw Usage("cannot write the report to " + dir + ": " + ec.message());
    created.push_back(p.string());
  }
  const std::string probe = dir + "/.torchneck-write-test";
  FILE* f = std::fopen(probe.c_str(), "w");
  if (f == nullptr || std::fputs("ok", f) < 0 || std::fclose(f) != 0) {
    const std::string why = std::strerror(errno);
    for (auto it = created.rbegin(); it != created.rend(); ++it) ::rmdir(it->c_str());
    throw Usage("cannot write the report to " + dir + ": " + why);
  }
  std::remove(probe.c_str());
  return created;
}

void phase(const char* what) { timing_phase(what); }

int run(int argc, char** argv) {
  phase("start");
  // TORCHNECK_INGEST_THREADS=2: scan and parse a large trace (1 MiB, 8192
  // events) on two threads. Off by default: on the shared 2-core VM it was
  // measured on, the extra page faults cost more than it gained
  // (docs/analyze.md); on a machine with idle cores it may pay.
  if (const char* v = std::getenv("TORCHNECK_INGEST_THREADS"); v != nullptr && std::strcmp(v, "2") == 0) {
    kineto::detail::set_parallel_min_events(8192);
    kineto::detail::set_parallel_min_bytes(size_t{1} << 20);
  }
  const Args a = parse(argc, argv);
  const std::vector<std::string> files = kineto::trace_files(a.path);
  const std::string dir = a.out.empty() ? default_dir(a.path) : a.out;
  const std::vector<std::string> created = prepare_dir(dir);

  const auto t0 = std::chrono::steady_clock::now();
  const bool tty = ::isatty(2) != 0;
  bool bar = false;
  std::vector<kineto::Trace> traces;
  for (size_t i = 0; i < files.size(); ++i) {
    auto progress = [&](size_t done, size_t total) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!tty || s < 1.0 || total == 0) return;
      bar = true;
      const int width = 30;
      const int filled = static_cast<int>(width * static_cast<double>(done) / static_cast<double>(total));
      std::fprintf(stderr, "\rtorchneck: reading %zu/%zu [%-*s] %3.0f %%", i + 1, files.size(), width,
                   std::string(static_cast<size_t>(filled), '#').c_str(), 100.0 * done / total);
    };
    try {
      traces.push_back(kineto::load_trace(files[i], progress));
    } catch (...) {
      for (auto it = created.rbegin(); it != created.rend(); ++it) ::rmdir(it->c_str());
      throw;
    }
  }
  if (bar) std::fputs("\r\033[K", stderr);
  phase("read and parse");
  std::stable_sort(traces.begin(), traces.end(),
                   [](const kineto::Trace& x, const kineto::Trace& y) { return x.rank < y.rank; });

  // The GPU analyses (every rank's) on a second core, while this one does
  // the CPU side and writes trace.json, which needs none of them (a third
  // of the time of a large trace each).
  auto gpu_reports = std::async(std::launch::async, [&traces] {
    std::vector<gpu::GpuReport> reports;
    for (const auto& t : traces) reports.push_back(gpu::gpu_report(t));
    return reports;
  });
  // The CPU side of the first rank is the run; every rank gets its GPU report.
  Run run = run_from_trace(traces.front());
  phase("CPU side as a run");
  if (traces.size() > 1) {
    run.run.script = a.path;
    run.notes.push_back("several ranks: the operator tables and steps are rank " +
                        std::to_string(traces.front().rank) + "'s; the GPU section is given for every rank under \"ranks\"");
  }
  SummaryOptions so;
  so.top_python = so.top_ops = a.top;
  Analysis analysis = analyze(run, so);
  phase("run analysis");

  OutputOptions out;
  out.dir = dir;
  std::error_code ec;
  out.cwd = std::filesystem::current_path(ec).string();
  out.summary = so;
  out.trace.steps = a.trace_steps;
  out.trace.kineto = &traces.front();  // GPU tracks of the first rank, as its CPU side
  // The other files wait for the GPU findings: written on a second thread
  // once the GPU analyses are in, while this one writes trace.json. The two
  // share `analysis` but not its members: trace.json reads only `steps`.
  OutputOptions rest_out = out;
  rest_out.write_trace = false;
  auto rest = std::async(std::launch::async, [&]() -> std::pair<std::string, std::string> {
    add_gpu_reports(analysis, gpu_reports.get());  // the first rank's GPU findings combined with the CPU side's
    std::string error;
    std::string text = write_analysed(run, analysis, rest_out, &error);
    return {std::move(text), std::move(error)};
  });
  std::string trace_error;
  try {
    write_trace_json(run, analysis, out);
  } catch (const std::runtime_error& e) {
    trace_error = e.what();  // said after the report, as for the other files
  }
  phase("trace.json");
  auto [text, error] = rest.get();
  if (error.empty()) error = trace_error;
  phase("other files (waited for)");
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (!error.empty()) {
    std::fprintf(stderr, "torchneck: %s\n", error.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // One short-lived process that allocates and frees tens of megabytes
  // phase after phase: memory freed is kept for the next phase rather than
  // handed back and faulted in again (a fresh 4 KiB page costs ~12 us on the
  // VMs measured, docs/analyze.md), in huge pages where ./torchneck sets
  // glibc.malloc.hugetlb=1. (One arena for all threads, M_ARENA_MAX 1, was
  // slower: the second thread, GPU analyses and files, then waits on the
  // main one's malloc lock.)
  // The trace's text is mapped apart (core/big_memory.h).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 2 << 20);

  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n') c = ' ';
    std::fprintf(stderr, "torchneck: %s\n", msg.c_str());
    return 2;
  }
}
