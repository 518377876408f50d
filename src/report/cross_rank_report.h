// A distributed job's ranks in the reports: the terminal report's "Ranks"
// section and profile.json's "ranks" and "collectives" (docs/profile-json.md).
#pragma once

#include <string>
#include <vector>

#include "analyze/gpu/gpu_report.h"
#include "analyze/cross_rank.h"
#include "report/json_writer.h"

namespace torchneck {

// "" when the analysis has no ranks.
std::string ranks_terminal_section(const RankAnalysis& a);

// "ranks": one object per rank: its summary (analyze/cross_rank.h) and, when the
// job's traces had one per rank, its GPU report as "gpu". A folder of
// Kineto traces without a live rank comparison writes its GPU reports alone
// (each with its "rank"), as before. "collectives": the matched operations.
// Nothing when there is one process.
void write_ranks_json(JsonWriter& w, const RankAnalysis& a, const std::vector<gpu::GpuReport>& gpu);

}  // namespace torchneck
