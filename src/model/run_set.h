// Several runs analysed together: the ranks of one distributed job today,
// a before/after pair (`diff`) next. The one place where runs are put
// together: ordered, checked against each other, and the run whose CPU
// side stands for the set is named.
#pragma once

#include <string>
#include <vector>

#include "model/run.h"

namespace torchneck {

struct RunSet {
  std::vector<Run> runs;           // by rank (stable: files in their given order within a rank)
  std::vector<std::string> notes;  // what the merge noticed (disagreeing world sizes, duplicate ranks)

  // The run whose CPU side (steps, operators, layers) the set's report
  // shows: the lowest rank's.
  const Run& primary() const { return runs.front(); }
  Run& primary() { return runs.front(); }
};

// The ranks of one job, each read on its own. Throws std::invalid_argument
// on an empty list.
RunSet merge_ranks(std::vector<Run> runs);

}  // namespace torchneck
