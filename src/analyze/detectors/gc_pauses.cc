// gc_pauses: Python's garbage collector takes a share of the steady steps.
#include "analyze/diagnosis.h"

#include <cstdio>

namespace torchneck {
namespace {

// Below a twentieth of the step, collections are within the noise of the
// step time itself, and tuning them buys nothing visible.
constexpr double kShare = 0.05;
constexpr double kHighShare = 0.20;
// A pause or two in the steady steps is an event (an explicit gc.collect(),
// one full collection), not a pattern that tuning the collector changes.
constexpr uint64_t kMinCollections = 3;
// gc.freeze() after setup moves the long-lived objects (model, dataset,
// imported modules) out of every later collection's reach, and a higher
// gen-0 threshold makes collections rarer: assumed to save half the time.
constexpr double kAssumedSaving = 0.5;

}  // namespace

void detect_gc_pauses(const DiagnosisInput& in, std::vector<Finding>& out) {
  const GcAnalysis& g = in.gc;
  if (!g.observed || g.span_ns <= 0 || g.collections < kMinCollections || g.share < kShare) return;
  Finding f = make_finding(FindingId::gc_pauses);
  if (g.share >= kHighShare) f.severity = Severity::kHigh;
  const size_t steps = g.span.steps();
  f.title = "Garbage collection takes " + fmt_pct(g.share) + " of the steady steps";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%llu collections in %zu steady steps (%.1f per step), %s of pauses in %s%s",
                static_cast<unsigned long long>(g.collections), steps,
                steps ? static_cast<double>(g.collections) / static_cast<double>(steps) : 0.0, fmt_ms(g.pause_ns).c_str(),
                fmt_ms(g.span_ns).c_str(), g.estimated ? " (estimated from the whole run's totals)" : "");
  f.evidence.push_back(buf);
  std::string gens = "longest pause " + fmt_ms(g.max_ns) + "; by generation:";
  for (int i = 0; i < GcTotals::kGenerations; ++i) {
    std::snprintf(buf, sizeof buf, "%s %d: %llu (%s)", i ? "," : "", i, static_cast<unsigned long long>(g.by_generation[i]),
                  fmt_ms(g.ns_by_generation[i]).c_str());
    gens += buf;
  }
  f.evidence.push_back(gens);
  std::snprintf(buf, sizeof buf, "the whole run: %llu collections, %s, %lld unreachable objects found",
                static_cast<unsigned long long>(g.totals.collections), fmt_ms(g.totals.total_ns).c_str(),
                static_cast<long long>(g.totals.collected));
  f.evidence.push_back(buf);
  f.recommendation = "call gc.freeze() once setup is done (model, data, optimizer built) so that later collections "
                     "skip those objects; raise the threshold (gc.set_threshold(50000, 50, 100)); avoid reference "
                     "cycles made in the loop (closures holding themselves, objects that point back at their owner), "
                     "which only the collector frees";
  f.estimated_gain_pct = 100.0 * kAssumedSaving * g.share;
  f.gain_arithmetic = "collections " + fmt_ms(g.pause_ns) + " x " + fmt_pct(kAssumedSaving) + " / steady steps " + fmt_ms(g.span_ns);
  out.push_back(std::move(f));
}

}  // namespace torchneck
