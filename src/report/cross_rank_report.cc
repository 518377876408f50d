#include "report/cross_rank_report.h"

#include "core/clock.h"
#include "report/appendf.h"
#include "report/gpu_sections.h"

namespace torchneck {

std::string ranks_terminal_section(const RankAnalysis& a) {
  if (a.ranks.empty()) return "";
  std::string out;
  if (!a.failure.empty()) out += "\nFAILED: " + a.failure + "; its own report: rank-" + std::to_string(a.first_failure) + "/report.txt\n";
  out += "\nRanks: " + std::to_string(a.ranks.size()) + ", mean of " + std::to_string(a.steps) +
                    " steps steady on every rank (ms per step; wait: in collectives for the last rank to "
                    "arrive, transfer: after it; both where no work of the rank overlapped)\n";
  appendf(out, "  %-5s %9s %9s %9s %9s %9s %8s %8s  %s\n", "rank", "step", "data", "compute", "wait", "transfer",
          "last at", "cpu wait", "ended");
  for (const RankSummary& s : a.ranks) {
    const std::string ended = s.ending.empty()     ? "no profile"
                              : s.ending == "trace" ? s.ending  // a trace does not say how its rank ended
                                                    : s.ending + " (" + std::to_string(s.exit_code) + ")";
    if (s.steps == 0) {
      appendf(out, "  %-5lld %9s %9s %9s %9s %9s %8s %8s  %s\n", static_cast<long long>(s.rank), "-", "-", "-",
              "-", "-", "-", "-", ended.c_str());
      continue;
    }
    const std::string runq = s.runqueue_share >= 0 ? fmt_pct(s.runqueue_share) : "?";
    appendf(out, "  %-5lld %9.2f %9.2f %9.2f %9.2f %9.2f %8s %8s  %s\n", static_cast<long long>(s.rank),
            s.step_ns / 1e6, s.data_ns / 1e6, s.compute_ns / 1e6, s.wait_ns / 1e6, s.transfer_ns / 1e6,
            fmt_pct(s.last_share).c_str(), runq.c_str(), ended.c_str());
  }
  if (!a.collectives.empty()) {
    appendf(out, "  collectives matched on every rank: %llu; clock: %s\n",
            static_cast<unsigned long long>(a.matched), a.clock.c_str());
    appendf(out, "  %-28s %-14s %8s %11s %10s %10s %10s\n", "collective", "kind", "calls", "bytes/call", "mean ms",
            "wait ms", "transfer");
    for (const CollectiveStats& c : a.collectives)
      appendf(out, "  %-28s %-14s %8llu %11s %10.3f %10.3f %10.3f\n", c.name.c_str(), c.kind.c_str(),
              static_cast<unsigned long long>(c.calls),
              c.bytes_per_call >= 0 ? fmt_mib(static_cast<double>(c.bytes_per_call)).c_str() : "?",
              c.duration_ns / 1e6, c.wait_ns / 1e6, c.transfer_ns / 1e6);
  } else {
    out += "  no collective was recorded on every rank\n";
  }
  for (const std::string& n : a.notes) out += "  note: " + n + "\n";
  return out;
}

void write_ranks_json(JsonWriter& w, const RankAnalysis& a, const std::vector<gpu::GpuReport>& gpu) {
  if (a.ranks.empty()) {
    if (gpu.size() > 1) {
      w.key("ranks").begin_array();
      for (const auto& r : gpu) write_gpu_json(w, r);
      w.end_array();
    }
    return;
  }
  w.key("ranks").begin_array();
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    const RankSummary& s = a.ranks[i];
    w.begin_object();
    w.field("rank", s.rank);
    w.field("host", s.host);
    w.field("ending", s.ending);
    w.field("exit_code", static_cast<int64_t>(s.exit_code));
    w.field("steps", static_cast<uint64_t>(s.steps));
    w.field("step_ms", s.step_ns / 1e6);
    w.field("data_ms", s.data_ns / 1e6);
    w.field("compute_ms", s.compute_ns / 1e6);
    w.field("collective_wait_ms", s.wait_ns / 1e6);
    w.field("collective_transfer_ms", s.transfer_ns / 1e6);
    w.key("runqueue_share");
    s.runqueue_share >= 0 ? w.value(s.runqueue_share) : w.null();
    w.key("cpu_ms");
    s.cpu_ns >= 0 ? w.value(s.cpu_ns / 1e6) : w.null();
    w.key("runqueue_ms");
    s.runqueue_ns >= 0 ? w.value(s.runqueue_ns / 1e6) : w.null();
    w.field("last_arrival_share", s.last_share);
    w.field("collectives", s.collectives);
    w.field("collective_bytes", s.collective_bytes);
    w.field("clock_offset_ns", i < a.clock_offset_ns.size() ? a.clock_offset_ns[i] : int64_t{0});
    if (gpu.size() == a.ranks.size()) {
      w.key("gpu");
      write_gpu_json(w, gpu[i]);
    }
    w.end_object();
  }
  w.end_array();
  w.key("first_failure");
  if (a.first_failure >= 0) {
    w.begin_object();
    w.field("rank", a.first_failure);
    w.field("text", a.failure);
    w.end_object();
  } else {
    w.null();
  }
  w.key("collectives").begin_object();
  w.field("matched", a.matched);
  w.field("steps_compared", static_cast<uint64_t>(a.steps));
  w.field("typical_wait_ms", a.typical_wait_ns / 1e6);
  w.field("clock", a.clock);
  w.key("by_name").begin_array();
  for (const CollectiveStats& c : a.collectives) {
    w.begin_object();
    w.field("name", c.name);
    w.field("kind", c.kind);
    w.field("calls", c.calls);
    w.field("bytes_per_call", c.bytes_per_call);
    w.field("mean_ms", c.duration_ns / 1e6);
    w.field("wait_ms", c.wait_ns / 1e6);
    w.field("transfer_ms", c.transfer_ns / 1e6);
    w.end_object();
  }
  w.end_array();
  w.key("notes").begin_array();
  for (const std::string& n : a.notes) w.value(n);
  w.end_array();
  w.end_object();
}

}  // namespace torchneck
