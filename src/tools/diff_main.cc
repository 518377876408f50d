// `torchneck diff [options] BEFORE AFTER`: what changed between two runs
// (docs/diff.md). BEFORE and AFTER are run or analyze folders (their
// profile.json), profile.json files, or Kineto traces (analysed first, as
// `torchneck analyze` would). No Python, no torch.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "compare/diff.h"
#include "compare/diff_report.h"
#include "compare/profile_view.h"
#include "compare/trace_profile.h"
#include "core/files.h"
#include "pipeline/sources.h"
#include "report/output_dir.h"
#include "report/printable.h"
#include "tools/one_line_error.h"

namespace {

using namespace torchneck;
using namespace torchneck::compare;

constexpr const char* kUsage =
    "usage: torchneck diff [options] BEFORE AFTER\n"
    "\n"
    "What changed between two runs: the step time's change with a 95 % interval\n"
    "from both runs' step-to-step noise, the phases, layers, operators and Python\n"
    "functions that moved most, the findings resolved, new and kept, and each\n"
    "resolved finding's estimated gain against the change measured. BEFORE and\n"
    "AFTER: torchneck run or analyze folders, their profile.json, or Kineto traces.\n"
    "\n"
    "options:\n"
    "  -o, --output DIR        where diff.json, diff.html and diff.txt go\n"
    "                          (default: torchneck-out/diff-<date>-<time>)\n"
    "  --top N                 rows per table of movers (default 10)\n"
    "  --fail-if-slower PCT    exit 1 when AFTER is slower by more than PCT %\n"
    "                          and the slowdown is outside the noise (for CI);\n"
    "                          exit 3 when a run has too few steps to tell\n"
    "  --noise-floor PCT       call no change smaller than PCT % significant\n"
    "                          (default 5: runs of one script drift that much)\n"
    "  --different-scripts     compare runs of two different scripts\n"
    "  -h, --help              show this help\n";

// --fail-if-slower's exit statuses; 0 is a pass and 2 bad usage or input.
constexpr int kExitSlower = 1;
constexpr int kExitUndecided = 3;

struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::string out;
  size_t top = 10;
  bool fail_set = false;
  double fail_pct = 0;
  bool different_scripts = false;
  double noise_floor_pct = kDefaultNoiseFloorPct;
  std::vector<std::string> operands;
};

double percentage(const std::string& name, const std::string& v, double most) {
  char* end = nullptr;
  const double p = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(p >= 0 && p <= most))
    throw Usage(name + " must be a percentage between 0 and " + std::to_string(static_cast<int>(most)) + ", not '" + v +
                "'");
  return p;
}

// The same spellings as every command's (python/torchneck/options.py):
// `--name VALUE` or `--name=VALUE` (`-o DIR` for -o); an option given twice
// must say the same both times.
Args parse(int argc, char** argv) {
  Args a;
  std::map<std::string, std::string> seen;
  bool only_operands = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (only_operands || arg == "-" || arg.empty() || arg[0] != '-') {
      a.operands.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_operands = true;
      continue;
    }
    std::optional<std::string> inline_value;
    if (const auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto value = [&](const std::string& name) -> std::string {
      std::string v;
      if (inline_value) v = *inline_value;
      else if (i + 1 >= argc) throw Usage(name + " needs a value");
      else v = argv[++i];
      const std::string canonical = name == "-o" ? "--output" : name;
      if (auto it = seen.find(canonical); it != seen.end() && it->second != v)
        throw Usage(canonical + " given twice, as " + it->second + " and " + v + "; give it once");
      seen[canonical] = v;
      return v;
    };
    if (inline_value && (arg == "--different-scripts" || arg == "--help"))
      throw Usage(arg + " takes no value");
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "-o" || arg == "--output") {
      a.out = value(arg);
      if (a.out.empty()) throw Usage(arg + " needs a folder name");
    } else if (arg == "--top") {
      const std::string v = value(arg);
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 1000) throw Usage("--top must be an integer between 1 and 1000, not '" + v + "'");
      a.top = static_cast<size_t>(n);
    } else if (arg == "--fail-if-slower") {
      a.fail_set = true;
      a.fail_pct = percentage(arg, value(arg), 1000);
    } else if (arg == "--noise-floor") {
      a.noise_floor_pct = percentage(arg, value(arg), 100);
    } else if (arg == "--different-scripts") {
      a.different_scripts = true;
    } else {
      throw Usage("unknown option " + arg + " (see torchneck diff --help)");
    }
  }
  if (a.operands.size() != 2)
    throw Usage("diff needs two runs, BEFORE and AFTER (usage: torchneck diff [options] BEFORE AFTER)");
  return a;
}

// The first LIMIT bytes of the regular file at PATH (a FIFO or a device is
// refused at once, without blocking); WHOLE: the file must fit in LIMIT.
std::string read_file(const std::string& path, size_t limit, bool whole) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, &size);
  if (whole && size > limit) {
    ::close(fd);
    throw std::runtime_error(path + ": over " + std::to_string(limit >> 20) +
                             " MiB, half of this machine's memory: not read");
  }
  std::string out(std::min<uint64_t>(size, limit), '\0');
  size_t at = 0;
  while (at < out.size()) {
    const ssize_t n = ::read(fd, out.data() + at, out.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(at);
  return out;
}

// The first bytes of a file, enough to tell a profile.json from a trace.
constexpr size_t kSniffBytes = 4096;

// A folder's or file's profile: profile.json, or a Kineto trace analysed.
ProfileView load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw std::runtime_error("cannot read " + path + ": no such file or folder");
  if (fs::is_directory(path, ec)) {
    if (fs::is_regular_file(path + "/profile.json", ec))
      return read_profile(read_file(path + "/profile.json", PipelineOptions().read_limits.max_text, true), path);
    if (fs::is_regular_file(path + "/profile.spill", ec))
      throw std::runtime_error(path + ": its run left no profile.json (killed?); `torchneck report " + path +
                               "` rebuilds it from profile.spill");
    std::vector<std::string> traces;
    try {
      traces = kineto_trace_files(path);
    } catch (const std::exception&) {
      throw std::runtime_error(path + ": not a torchneck run or analyze folder, nor a folder of Kineto traces");
    }
    return read_profile(profile_json_of_traces(path), path);
  }
  const std::string head = read_file(path, kSniffBytes, false);
  if (head.compare(0, 1, "{") == 0 && head.find("\"torchneck.profile/") != std::string::npos)
    return read_profile(read_file(path, PipelineOptions().read_limits.max_text, true), path);
  return read_profile(profile_json_of_traces(path), path);
}

// The report on stdout, or one line saying why it could not be (a full disk
// behind a redirection); the files are written by then.
void print_report(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    throw std::runtime_error(std::string("cannot write the report to stdout: ") + std::strerror(errno));
}

// `--fail-if-slower PCT`'s answer as an exit status, with its one line on stderr.
int gate_status(const RunDiff& d, double pct) {
  switch (slower_gate(d, pct)) {
    case Gate::kPass: return 0;
    case Gate::kSlower:
      std::fprintf(stderr,
                   "torchneck: slower by %.1f %% (95 %% interval %.1f .. %.1f %%), more than --fail-if-slower %g %%\n",
                   d.change_pct, d.ci95_pct->low, d.ci95_pct->high, pct);
      return kExitSlower;
    case Gate::kUndecided:
      std::fprintf(stderr, "torchneck: --fail-if-slower %g %% cannot decide: %s\n", pct, no_interval_reason(d).c_str());
      return kExitUndecided;
  }
  return kExitUndecided;
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  ProfileView before = load(a.operands[0]);
  ProfileView after = load(a.operands[1]);
  DiffOptions options;
  options.top = a.top;
  options.noise_floor_pct = a.noise_floor_pct;
  RunDiff d = diff_profiles(std::move(before), std::move(after), options);
  if (!d.same_script && !a.different_scripts)
    throw Usage(a.operands[0] + " ran " + d.before.script + " and " + a.operands[1] + " ran " + d.after.script +
                ": different scripts; give --different-scripts to compare them anyway");
  const PreparedDir dir = prepare_output_dir(a.out, "diff");
  const std::string text = diff_text(d);
  try {
    write_file_atomically(dir.absolute + "/diff.json", diff_json(d));
    write_file_atomically(dir.absolute + "/diff.html", diff_html(d));
    write_file_atomically(dir.absolute + "/diff.txt", text);
  } catch (...) {
    remove_created(dir.created);
    throw;
  }
  const std::string shown = printable_text(dir.shown);
  print_report(text + "\nFiles\n  " + shown + "/diff.html   open in a browser\n  " + shown +
               "/diff.json   machine-readable (schema " + kDiffSchema + ")\n  " + shown + "/diff.txt    this report\n");
  return a.fail_set ? gate_status(d, a.fail_pct) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return torchneck::tools::run_with_one_line_errors([&] { return run(argc, argv); });
}
