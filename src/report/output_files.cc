#include "report/output_files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "report/profile_json.h"
#include "report/pstats_writer.h"
#include "report/terminal_report.h"

namespace torchneck {

void write_file_atomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  const size_t n = std::fwrite(data.data(), 1, data.size(), f);
  const bool ok = n == data.size() && std::fflush(f) == 0;
  const int err = errno;
  std::fclose(f);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(ok ? errno : err));
  }
}

std::string write_outputs(const Run& run, const OutputOptions& options) {
  const Analysis analysis = analyze(run, options.summary);
  TerminalReportOptions t;
  t.output_dir = options.dir;
  t.cwd = options.cwd;
  std::string text = terminal_report(run, analysis, t);
  if (!options.dir.empty()) {
    write_file_atomically(options.dir + "/profile.json", profile_json(run, analysis));
    if (run.run.python_mode == "trace")
      write_file_atomically(options.dir + "/python.pstats", pstats_bytes(run));
    write_file_atomically(options.dir + "/report.txt", text);
  }
  return text;
}

}  // namespace torchneck
