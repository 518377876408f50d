// trace.json's GPU counters from NVML: per GPU, its utilisation, memory in
// use, power and SM clock as counter tracks of the main process, inside the
// trace's step window (as the memory track, trace_json_memory.cc). A field
// NVML could not read (-1) is left out of its event; an event with nothing
// left is not written.
#include <algorithm>
#include <initializer_list>

#include "report/appendf.h"
#include "report/trace_json_internal.h"

namespace torchneck::trace_detail {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// One counter event of GPU `k`'s track `what`, with its series (name,
// value) whose value is known (>= 0).
struct Series {
  const char* name;
  double value;
  bool known;
};

void counter(std::vector<std::string>& out, int64_t pid, int64_t ts_ns, uint32_t k, const char* what,
             std::initializer_list<Series> series) {
  std::string args;
  for (const Series& s : series)
    if (s.known) appendf(args, "%s\"%s\":%.2f", args.empty() ? "" : ",", s.name, s.value);
  if (args.empty()) return;
  std::string e;
  appendf(e, "{\"ph\":\"C\",\"name\":\"GPU %u %s\",\"pid\":%lld,\"tid\":%lld,\"ts\":", k, what,
          static_cast<long long>(pid), static_cast<long long>(kNvmlTid));
  append_us(e, ts_ns);
  e += ",\"args\":{" + args + "}}";
  out.push_back(std::move(e));
}

void counters(std::vector<std::string>& out, int64_t pid, int64_t ts_ns, const NvmlSample& s) {
  counter(out, pid, ts_ns, s.device, "utilisation (%)",
          {{"gpu", static_cast<double>(s.gpu_util_pct), s.gpu_util_pct >= 0},
           {"memory", static_cast<double>(s.mem_util_pct), s.mem_util_pct >= 0}});
  counter(out, pid, ts_ns, s.device, "memory (MiB)",
          {{"used", static_cast<double>(s.mem_used_bytes) / kMiB, s.mem_used_bytes >= 0}});
  counter(out, pid, ts_ns, s.device, "power (W)",
          {{"power", static_cast<double>(s.power_mw) / 1000.0, s.power_mw >= 0}});
  counter(out, pid, ts_ns, s.device, "SM clock (MHz)",
          {{"sm", static_cast<double>(s.sm_clock_mhz), s.sm_clock_mhz >= 0}});
}

}  // namespace

std::vector<std::string> nvml_events(const Run& run, int64_t pid, int64_t base, int64_t window_start,
                                     int64_t window_end) {
  std::vector<std::string> out;
  const int64_t from = std::max(base, window_start);
  for (uint32_t k = 0; k < run.nvml_devices.size(); ++k)
    counters_in_window(
        run.nvml, from, window_end, [k](const NvmlSample& s) { return s.device == k; },
        [&](int64_t t, const NvmlSample& s) { counters(out, pid, t - base, s); });
  if (!out.empty()) track_name(out, pid, kNvmlTid, "GPUs (NVML)", 5);
  return out;
}

}  // namespace torchneck::trace_detail
