#include "analyze/findings.h"

#include <cstdio>

namespace torchneck {

const char* to_string(Severity s) {
  switch (s) {
    case Severity::kHigh: return "high";
    case Severity::kMedium: return "medium";
    case Severity::kLow: return "low";
  }
  return "low";
}

const std::vector<FindingInfo>& finding_table() {
  using enum Severity;
  static const std::vector<FindingInfo> table = {
#define FINDING(id, severity, evidence, meaning, fires, gain) {FindingId::id, #id, severity, evidence, meaning, fires, gain},
#include "analyze/findings.def"
#undef FINDING
  };
  return table;
}

const FindingInfo& finding_info(FindingId id) { return finding_table()[static_cast<size_t>(id)]; }

const FindingInfo* find_finding(std::string_view name) {
  for (const FindingInfo& f : finding_table())
    if (name == f.name) return &f;
  return nullptr;
}

Finding make_finding(FindingId id) {
  const FindingInfo& info = finding_info(id);
  Finding f;
  f.id = info.name;
  f.severity = info.default_severity;
  return f;
}

std::string findings_markdown() {
  std::string md =
      "# Findings\n"
      "\n"
      "Generated from `src/analyze/findings.def` (the test `FindingsTable.DocsMatchTheTable` fails when\n"
      "this file differs; `TORCHNECK_WRITE_DOCS=1` running it rewrites the file). How the findings are\n"
      "ordered and the verdict chosen: [diagnosis.md](diagnosis.md).\n"
      "\n"
      "Evidence: **CPU** is the run's timeline (a live run, or the CPU side of a Kineto trace); **GPU** is\n"
      "the device side of a Kineto trace (`torchneck analyze`). Where the GPU side has evidence for an id,\n"
      "its finding replaces the CPU side's.\n"
      "\n"
      "| id | severity | evidence | what it means | fires when | estimated gain |\n"
      "|---|---|---|---|---|---|\n";
  for (const FindingInfo& f : finding_table()) {
    md += std::string("| `") + f.name + "` | " + to_string(f.default_severity) + " | " + f.evidence + " | " +
          f.meaning + " | " + f.fires_when + " | " + f.estimated_gain + " |\n";
  }
  return md;
}

std::string fmt_ms(int64_t ns) {
  char buf[32];
  const double ms = static_cast<double>(ns) / 1e6;
  std::snprintf(buf, sizeof buf, ms >= 100 ? "%.0f ms" : ms >= 10 ? "%.1f ms" : "%.2f ms", ms);
  return buf;
}

// One decimal: GPU shares are compared with the TensorBoard plugin's, which
// it prints to a tenth of a percent ("33.4% of the step time").
std::string fmt_pct(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", 100.0 * f);
  return buf;
}

// MiB (2^20 bytes), as top and /proc show memory: "0.52 MiB", "12.3 MiB", "180 MiB".
std::string fmt_mib(double bytes) {
  char buf[32];
  const double mib = bytes / (1024.0 * 1024.0);
  const double a = mib < 0 ? -mib : mib;
  std::snprintf(buf, sizeof buf, a >= 100 ? "%.0f MiB" : a >= 10 ? "%.1f MiB" : "%.2f MiB", mib);
  return buf;
}

}  // namespace torchneck
