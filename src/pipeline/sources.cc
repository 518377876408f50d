#include "pipeline/sources.h"

#include <utility>

#include "ingest/kineto_json.h"
#include "ingest/kineto_to_run.h"
#include "model/processes.h"
#include "model/rank_folders.h"
#include "model/run_io.h"

namespace torchneck {
namespace {

Run load_run_folder(const std::string& dir, std::vector<std::string>& /*notes: the run's own*/) {
  Run run = load_run(dir + "/profile.spill");
  merge_worker_profiles(run, dir);
  return run;
}

Source profiled(RunSet set) {
  Source s;
  s.set = std::move(set);
  return s;
}

RunSet only(Run run) {
  RunSet set;
  set.runs.push_back(std::move(run));
  return set;
}

}  // namespace

Source live_source(Run run, const std::string& dir) {
  const int64_t pid = run.processes.empty() ? 0 : run.processes.front().pid;
  if (!dir.empty()) merge_worker_profiles(run, dir);
  Source s = profiled(only(std::move(run)));
  s.trace_pid = pid;
  return s;
}

Source spill_source(const std::string& dir, const std::vector<Experiment>* experiments) {
  Run run = load_run(dir + "/profile.spill");
  if (experiments != nullptr) {
    run.experiments = *experiments;
    save_run(run, dir + "/profile.spill");
  }
  merge_worker_profiles(run, dir);
  return profiled(only(std::move(run)));
}

Source rank_folders_source(const std::string& base, bool strict) {
  RankFolders folders = load_rank_folders(base, strict, &load_run_folder);
  Source s = profiled(merge_ranks(std::move(folders.runs)));
  Run& primary = s.set.primary();
  primary.notes.insert(primary.notes.end(), folders.notes.begin(), folders.notes.end());
  primary.notes.insert(primary.notes.end(), s.set.notes.begin(), s.set.notes.end());
  s.set.notes.clear();
  return s;
}

// Two threads pay from this size on (docs/analyze.md).
constexpr size_t kTwoThreadsMinEvents = 8192;
constexpr size_t kTwoThreadsMinBytes = size_t{1} << 20;

Source traces_source(const std::string& path, const PipelineOptions& options) {
  if (options.ingest_two_threads) {
    kineto::detail::set_parallel_min_events(kTwoThreadsMinEvents);
    kineto::detail::set_parallel_min_bytes(kTwoThreadsMinBytes);
  }
  const std::vector<std::string> files = kineto::trace_files(path);
  std::vector<Run> ranks;
  for (size_t i = 0; i < files.size(); ++i) {
    std::function<void(size_t, size_t)> progress;
    if (options.on_read_progress)
      progress = [&](size_t done, size_t total) { options.on_read_progress(i, files.size(), done, total); };
    ranks.push_back(run_of_trace(kineto::load_trace(files[i], progress, options.read_limits)));
  }
  Source s;
  s.kind = SourceKind::kTraces;
  s.set = merge_ranks(std::move(ranks));
  s.path = path;
  return s;
}

std::vector<std::string> kineto_trace_files(const std::string& path) { return kineto::trace_files(path); }

}  // namespace torchneck
