// trace.json's memory tracks: the resident memory as a counter track and the
// garbage collections as slices on a track of their own, both in the main
// process, inside the trace's step window.
#include <algorithm>

#include "report/appendf.h"
#include "report/trace_json_internal.h"

namespace torchneck::trace_detail {
namespace {

// One counter event: the resident set and, when counted, torch's CPU
// allocator beside it (two series of one track).
void counter(std::vector<std::string>& out, int64_t pid, int64_t ts_ns, const MemorySample& s) {
  std::string e;
  appendf(e, "{\"ph\":\"C\",\"name\":\"memory (MiB)\",\"pid\":%lld,\"tid\":%lld,\"ts\":",
          static_cast<long long>(pid), static_cast<long long>(kMemoryTid));
  append_us(e, ts_ns);
  const double mib = 1024.0 * 1024.0;
  appendf(e, ",\"args\":{\"rss\":%.2f", static_cast<double>(s.rss_bytes) / mib);
  if (s.torch_allocated_bytes >= 0) appendf(e, ",\"torch_cpu\":%.2f", static_cast<double>(s.torch_allocated_bytes) / mib);
  e += "}}";
  out.push_back(std::move(e));
}

}  // namespace

void track_name(std::vector<std::string>& out, int64_t pid, int64_t tid, const char* name, int sort_index) {
  std::string e;
  appendf(e, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%lld,\"tid\":%lld,\"args\":{\"name\":\"%s\"}}",
          static_cast<long long>(pid), static_cast<long long>(tid), name);
  out.push_back(std::move(e));
  e.clear();
  appendf(e, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%lld,\"tid\":%lld,\"args\":{\"sort_index\":%d}}",
          static_cast<long long>(pid), static_cast<long long>(tid), sort_index);
  out.push_back(std::move(e));
}

std::vector<std::string> memory_events(const Run& run, int64_t pid, int64_t base, int64_t window_start,
                                       int64_t window_end) {
  std::vector<std::string> out;
  const int64_t from = std::max(base, window_start);
  counters_in_window(
      run.memory, from, window_end, [](const MemorySample&) { return true; },
      [&](int64_t t, const MemorySample& s) { counter(out, pid, t - base, s); });
  if (!out.empty()) track_name(out, pid, kMemoryTid, "Memory", 3);
  size_t pauses = 0;
  for (const GcPause& p : run.gc_pauses) {
    if (p.end_ns < from || p.start_ns > window_end) continue;
    std::string e;
    appendf(e, "{\"ph\":\"X\",\"cat\":\"gc\",\"name\":\"gc (generation %d)\",\"pid\":%lld,\"tid\":%lld,\"ts\":",
            p.generation, static_cast<long long>(pid), static_cast<long long>(kGcTid));
    append_us(e, std::max(p.start_ns, from) - base);
    e += ",\"dur\":";
    append_us(e, std::max<int64_t>(0, std::min(p.end_ns, window_end) - std::max(p.start_ns, from)));
    appendf(e, ",\"args\":{\"generation\":%d,\"collected\":%lld}}", p.generation, static_cast<long long>(p.collected));
    out.push_back(std::move(e));
    ++pauses;
  }
  if (pauses > 0) track_name(out, pid, kGcTid, "Garbage collections", 4);
  return out;
}

}  // namespace torchneck::trace_detail
