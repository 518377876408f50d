#include "compare/trace_profile.h"

#include <utility>
#include <vector>

#include "analyze/analysis.h"
#include "ingest/kineto_json.h"
#include "ingest/kineto_to_run.h"
#include "model/run_set.h"
#include "report/profile_json.h"

namespace torchneck::compare {

std::string profile_json_of_traces(const std::string& path) {
  std::vector<Run> ranks;
  for (const std::string& file : kineto::trace_files(path)) ranks.push_back(run_of_trace(kineto::load_trace(file)));
  RunSet set = merge_ranks(std::move(ranks));
  std::vector<gpu::GpuReport> reports;
  for (const Run& r : set.runs) reports.push_back(gpu::gpu_report(r));
  Run& run = set.primary();
  add_cpu_side(run);
  if (set.runs.size() > 1) run.run.script = path;  // as torchneck analyze names a folder of ranks
  Analysis analysis = analyze(run, SummaryOptions{});
  add_gpu_reports(analysis, std::move(reports));
  return profile_json(run, analysis);
}

}  // namespace torchneck::compare
