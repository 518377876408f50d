// A distributed job's output folder: BASE/rank-K/ per rank, each a run's
// own output folder (profile.spill, and its report), written by the rank
// itself (python/torchneck/this_rank.py); the merged report goes to BASE.
#pragma once

#include <string>
#include <vector>

#include "model/run.h"

namespace torchneck {

struct RankFolders {
  std::vector<Run> runs;           // one per rank folder with a readable profile, in rank order
  std::vector<std::string> notes;  // ranks without a profile, or refused (lenient)
  int64_t world_size = -1;
};

// Reads every BASE/rank-K/profile.spill; LOAD reads one folder's run (the
// workers merged, as `torchneck report` does). STRICT (`torchneck report
// BASE`): a rank folder of another job, world sizes that disagree, a rank
// missing or without a profile is a std::runtime_error of one line.
// Lenient (the launcher's merge after a crash): each is a note and the
// ranks that can be read are merged. Throws when no rank can be read.
RankFolders load_rank_folders(const std::string& base, bool strict, Run (*load)(const std::string& dir,
                                                                               std::vector<std::string>& notes));

}  // namespace torchneck
