// profile.json's "steps" object (docs/profile-json.md): the step
// statistics, their breakdown, the slow steps, each step of the timeline
// (every `every`-th), and the whole run by the step clocks.
#pragma once

#include <cstddef>

#include "analyze/steps.h"
#include "report/json_writer.h"

namespace torchneck {

void write_steps(JsonWriter& w, const StepAnalysis& s, size_t every);

}  // namespace torchneck
