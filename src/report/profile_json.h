// profile.json, schema "torchneck.profile/1" (docs/profile-json.md): the
// stable contract other tools and tests read. Keys are only ever added.
#pragma once

#include <string>

#include "analyze/analysis.h"
#include "model/run.h"

namespace torchneck {

inline constexpr const char* kProfileSchema = "torchneck.profile/1";

std::string profile_json(const Run& run, const Analysis& analysis);

}  // namespace torchneck
