// report.html: one self-contained page (no network at view time) that draws
// the profile and the flame tree in the browser. The page's template, script
// and style live in web/ and are built into the binary (web_assets.h); the
// data goes into a <script type="application/json"> block, escaped so that
// no name in it can close that block, and a Content-Security-Policy lets
// only the page's own script and style run.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "analyze/analysis.h"
#include "analyze/flame.h"
#include "model/run.h"

namespace torchneck {

// The page around the two JSON documents (profile_json(), flame_json()).
std::string html_report(const std::string& profile_json, const std::string& flame_json);

// The bound on report.html's size that html_report_for_run() keeps, whatever
// the length of the run (docs/report-html.md): caps on per-step rows, table
// rows and flame nodes, halved until the page fits.
inline constexpr size_t kHtmlReportMaxBytes = 3u << 20;
std::string html_report_for_run(const Run& run, const Analysis& analysis, size_t max_bytes = kHtmlReportMaxBytes);

// Exposed for tests. JSON text made safe inside an HTML <script> element:
// '<', '>', '&' and U+2028/U+2029 become \uXXXX escapes (only valid because
// in JSON they can only occur inside strings).
std::string html_safe_json(std::string_view json);
// Lowercase hex (a SHA-256 digest) to base64, as CSP hashes are written.
std::string hex_to_base64(std::string_view hex);

}  // namespace torchneck
