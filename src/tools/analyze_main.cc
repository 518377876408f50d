// `torchneck analyze [-o DIR] [--top N] [--trace-steps N] [--max-trace-size SIZE] PATH`: the
// report of a torch.profiler (Kineto) trace, or of a folder of rank traces,
// without Python or torch: the same kind of report as a live run (verdict
// first) and profile.json in the same schema, plus its "gpu" section (and
// "ranks" for several).
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/timing.h"
#include "pipeline/pipeline.h"
#include "report/output_dir.h"
#include "report/printable.h"
#include "tools/one_line_error.h"

namespace {

using namespace torchneck;

// The help of `torchneck analyze`: the Python launcher's own, generated
// from python/torchneck/cli.py at build time (scripts/gen-analyze-usage).
constexpr const char* kUsage =
#include "analyze_usage.inc"
    ;

struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::string path, out;
  ReportSettings settings;
  kineto::ReadLimits limits;
};

// analyze's options, with the same spellings, rules and wording as every
// command's in the Python launcher (python/torchneck/options.py): `--name
// VALUE` or `--name=VALUE`, `-o DIR` (a short option's value is the next
// argument), options and TRACE in any order, `--` before a TRACE that starts
// with '-', a repeat that disagrees refused. test_option_agreement.py runs
// the same argument lists through both.

// "An integer": ASCII digits, optionally negative, in [lo, hi]; strtol alone
// would also take " 5" and "+5", which the Python parser does not.
bool parse_int(const std::string& v, long lo, long hi, long* out) {
  const size_t digits = v.size() > 0 && v[0] == '-' ? 1 : 0;
  if (v.size() == digits) return false;
  for (size_t k = digits; k < v.size(); ++k)
    if (v[k] < '0' || v[k] > '9') return false;
  errno = 0;
  const long n = std::strtol(v.c_str(), nullptr, 10);
  if (errno == ERANGE || n < lo || n > hi) return false;
  *out = n;
  return true;
}

// "A size": ASCII digits, then K, M, G or T (powers of 1024, either case)
// or nothing (bytes), in [1, kMaxSize]: what options.py's "size" takes.
constexpr size_t kMaxSize = size_t{1} << 50;
bool parse_size(const std::string& v, size_t* out) {
  const std::string units = "KMGT";
  const size_t unit =
      v.empty() ? std::string::npos : units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(v.back()))));
  const size_t digits = unit == std::string::npos ? v.size() : v.size() - 1;
  if (digits == 0) return false;
  size_t n = 0;
  for (size_t k = 0; k < digits; ++k) {
    if (v[k] < '0' || v[k] > '9') return false;
    n = n * 10 + static_cast<size_t>(v[k] - '0');
    if (n > kMaxSize) return false;
  }
  const int shift = unit == std::string::npos ? 0 : 10 * static_cast<int>(unit + 1);
  if (n == 0 || n > (kMaxSize >> shift)) return false;
  *out = n << shift;
  return true;
}

// A report setting's option (pipeline/options.h): "--trace-steps" sets
// trace_steps. Returns false for another option; with a VALUE, sets it, or
// throws Usage when it is not an integer in the setting's range.
bool report_setting(ReportSettings& settings, const std::string& canonical, const std::string& name,
                    const std::string* value, std::string* compared) {
  bool found = false;
  settings.each([&](const char* setting, auto& member, long lo, long hi) {
    std::string option = std::string("--") + setting;
    std::replace(option.begin(), option.end(), '_', '-');
    if (option != canonical) return;
    found = true;
    if (value == nullptr) return;
    long n = 0;
    if (!parse_int(*value, lo, hi, &n))
      throw Usage(name + " must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi) +
                  ", not '" + *value + "'");
    member = static_cast<std::decay_t<decltype(member)>>(n);
    *compared = std::to_string(n);
  });
  return found;
}

// The same folder however spelled ("out", "./out/"): what repeats of -o compare.
std::string same_folder(const std::string& dir) {
  std::error_code ec;
  std::string s = std::filesystem::absolute(dir, ec).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

Args parse(int argc, char** argv) {
  Args a;
  std::map<std::string, std::pair<std::string, std::string>> given;  // canonical -> (as typed, compared)
  std::vector<std::string> operands;
  bool only_operands = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (only_operands || arg.empty() || arg[0] != '-' || arg == "-") {
      operands.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_operands = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    std::string name = arg, value;
    bool eq = false;
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      name = arg.substr(0, arg.find('='));
      value = arg.substr(arg.find('=') + 1);
      eq = true;
    }
    const std::string canonical = name == "-o" ? "--output" : name;
    if (canonical != "--output" && canonical != "--max-trace-size" &&
        !report_setting(a.settings, canonical, name, nullptr, nullptr))
      throw Usage("unknown option " + arg + " (see torchneck analyze --help)");
    if (!eq) {
      if (i + 1 >= argc) throw Usage(name + " needs a value");
      value = argv[++i];
    }
    std::string compared;
    if (canonical == "--output") {
      if (value.empty()) throw Usage(name + " needs a folder name");
      a.out = value;
      compared = same_folder(value);
    } else if (canonical == "--max-trace-size") {
      if (!parse_size(value, &a.limits.max_text))
        throw Usage(name + " must be a size between 1 and 1024T such as 512M or 20G (bytes, or K, M, G, T: " +
                    "powers of 1024), not '" + value + "'");
      compared = std::to_string(a.limits.max_text);
    } else {
      report_setting(a.settings, canonical, name, &value, &compared);  // one, as checked above
    }
    const auto seen = given.find(canonical);
    if (seen != given.end() && seen->second.second != compared) {
      const std::string shown = canonical == "--output" ? "-o/--output" : canonical;
      throw Usage(shown + " given twice, as " + seen->second.first + " and " + value + "; give it once");
    }
    given[canonical] = {value, compared};
  }
  if (operands.empty()) throw Usage("analyze needs a trace file or folder (usage: torchneck analyze [options] TRACE)");
  if (operands.size() > 1) throw Usage("analyze takes one trace file or folder, not also '" + operands[1] + "'");
  a.path = operands[0];
  return a;
}

// A bar on stderr while the traces are read, when that is a terminal and
// has taken a second.
class ReadProgress {
 public:
  void operator()(size_t index, size_t count, size_t done, size_t total) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (!tty_ || s < 1.0 || total == 0) return;
    drawn_ = true;
    const int width = 30;
    const int filled = static_cast<int>(width * static_cast<double>(done) / static_cast<double>(total));
    std::fprintf(stderr, "\rtorchneck: reading %zu/%zu [%-*s] %3.0f %%", index + 1, count, width,
                 std::string(static_cast<size_t>(filled), '#').c_str(), 100.0 * done / total);
  }
  ~ReadProgress() {
    if (drawn_) std::fputs("\r\033[K", stderr);
  }

 private:
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  const bool tty_ = ::isatty(2) != 0;
  bool drawn_ = false;
};

int run(int argc, char** argv) {
  timing_phase("start");
  // TORCHNECK_INGEST_THREADS=2: scan and parse a large trace on two
  // threads. Off by default: on a shared 2-core VM the extra page faults
  // cost more than it gained (docs/analyze.md).
  const char* threads = std::getenv("TORCHNECK_INGEST_THREADS");
  const Args a = parse(argc, argv);
  PipelineOptions options;
  options.ingest_two_threads = threads != nullptr && std::strcmp(threads, "2") == 0;
  options.settings = a.settings;
  options.read_limits = a.limits;
  kineto_trace_files(a.path);  // none: refused before a folder is made
  const PreparedDir prepared = prepare_output_dir(a.out, a.path);  // report/output_dir.h, as `run`'s
  options.dir = prepared.shown;
  std::error_code ec;
  options.cwd = std::filesystem::current_path(ec).string();
  Source source;
  {
    ReadProgress progress;
    options.on_read_progress = std::ref(progress);
    try {
      source = traces_source(a.path, options);
    } catch (...) {
      remove_created(prepared.created);
      throw;
    }
    options.on_read_progress = nullptr;  // the bar is gone with this block
  }
  timing_phase("read and parse");
  std::string error;
  const std::string text = report(source, options, &error);
  timing_phase("files written");
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (!error.empty()) {
    std::fprintf(stderr, "torchneck: %s\n", printable_text(error).c_str());
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

  return torchneck::tools::run_with_one_line_errors([&] { return run(argc, argv); });
}
