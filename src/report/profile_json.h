// profile.json, schema "torchneck.profile/2" (docs/profile-json.md): the
// stable contract other tools and tests read. Keys are only ever added.
#pragma once

#include <cstdint>
#include <string>

#include "analyze/analysis.h"
#include "model/run.h"

namespace torchneck {

inline constexpr const char* kProfileSchema = "torchneck.profile/2";

std::string profile_json(const Run& run, const Analysis& analysis);

// Caps for the copy of the profile that report.html embeds, so the page stays
// small on runs of any length (docs/report-html.md). profile.json itself is
// written without caps. When a cap applies, the root gains "html_limits":
// what was thinned or left out.
struct ProfileJsonLimits {
  size_t per_step = SIZE_MAX;  // per_step[]: every k-th step beyond this
  size_t python = SIZE_MAX;    // python[]: the heaviest by self and by total time
  size_t ops = SIZE_MAX;       // ops[]: likewise
  size_t layers = SIZE_MAX;    // layers[]: the first (heaviest)
  size_t shapes = SIZE_MAX;    // ops[].shapes[]: the most frequent
};
std::string profile_json(const Run& run, const Analysis& analysis, const ProfileJsonLimits& limits);

}  // namespace torchneck
