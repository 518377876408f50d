// `run --try` experiments in the reports (analyze/experiments.h): the
// terminal section and profile.json's "experiments" (docs/try.md).
#pragma once

#include <string>
#include <vector>

#include "analyze/experiments.h"
#include "report/json_writer.h"

namespace torchneck {

void write_experiments_json(JsonWriter& w, const std::vector<ExperimentResult>& results);
// "" without experiments.
std::string experiments_text(const std::vector<ExperimentResult>& results);

}  // namespace torchneck
