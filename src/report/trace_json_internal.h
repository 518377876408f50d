// trace.json's pieces (report/trace_json.h), shared by trace_json.cc (the
// window, nesting and writing) and trace_json_tracks.cc (what goes on which
// track). Not for other users.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report/trace_json.h"

namespace torchneck::trace_detail {

enum class SliceCat : uint8_t {
  kStep, kPhase, kModule, kUserScope, kOperator, kBackward, kTorchScript, kRuntime,
  kPython, kSample, kKernel, kMemcpy, kMemset,
};
constexpr int kNumSliceCats = 13;
const char* slice_cat_name(SliceCat c);
int priority(SliceCat c);
uint8_t rank(SliceCat c);

// Synthetic thread ids: the Steps track, and each thread's Python track
// (kPythonTidBase + thread index). Linux thread ids stay below 2^22.
constexpr int64_t kStepsTid = 999999999;
constexpr int64_t kPythonTidBase = 1000000000;
// The main process's memory tracks (trace_json_memory.cc).
constexpr int64_t kMemoryTid = 999999997;
constexpr int64_t kGcTid = 999999998;
// The main process's GPU counters from NVML (trace_json_nvml.cc).
constexpr int64_t kNvmlTid = 999999996;
// GPU processes: kGpuPidBase + device.
constexpr int64_t kGpuPidBase = 1000000;

// What a slice came from, for flows.
enum class Ref : uint8_t { kNone, kTimeline, kKineto };

struct Slice {
  int64_t pid = 0, tid = 0;
  int64_t start = 0, end = 0;
  SliceCat cat = SliceCat::kOperator;
  uint8_t rank = 4;
  bool clamped = false;  // its end was cut to its parent's (partial overlap)
  uint32_t depth = 0;
  Ref ref_kind = Ref::kNone;
  size_t ref = 0;        // index into Run::timeline or Activities::events
  int64_t free_point = -1;  // an instant inside it that no child covers, -1 none
  // Its name, cut to options.max_name_chars: a view of the run's or the
  // trace's own strings, or of TraceBuilder::owned for a name made here.
  std::string_view name;
  // Its args, JSON object members without braces: [args_at, +args_size) of
  // TraceBuilder::args. No string of its own: a trace has ~10^5 slices, and
  // two allocations each were a third of the time to write trace.json.
  uint32_t args_size = 0;
  size_t args_at = 0;
};

struct Flow {
  uint64_t id;
  size_t from, to;  // indices into slices
  const char* cat;  // "fwdbwd", "ac2g"
};

struct TraceBuilder {
  TraceBuilder(const Run& r, const Analysis& a, const TraceJsonOptions& o);

  void reserve_slices(size_t steps_in_window);  // after window_start/end are set
  void add_steps(size_t steps_in_window);
  void add_timeline();
  void add_modules();
  void add_python_frames();
  void add_samples();
  void add_gpu(const Activities& trace);
  void apply_cap();
  void add_flows();
  std::vector<std::string> metadata_events() const;
  std::string other_data(size_t steps_in_window, bool limited, size_t steps_in_run) const;

  // Keeps it, with `args` (JSON members), when it overlaps the window, else
  // counts it.
  void add(Slice s, std::string_view args = {});
  // Whether it overlaps the window (an end before its start moved to the
  // start); counts it when not. add() checks it too; callers may check
  // first, before they build its name and args.
  bool overlaps_window(int64_t start, int64_t end) const { return start < window_end && end >= window_start; }
  bool in_window(Slice& s);
  // A name for a slice: `name` itself (it outlives the builder) when short,
  // else its cut copy kept in `owned`.
  std::string_view name_for(std::string_view name);
  std::string_view own(std::string name);  // a name made here, kept in `owned`
  std::string& scratch();  // an empty string for building one slice's args
  std::string_view args_of(const Slice& s) const { return std::string_view(args).substr(s.args_at, s.args_size); }
  int64_t pid_of(uint32_t thread) const;
  int64_t tid_of(uint32_t thread) const;
  int64_t python_sort_index(uint32_t thread) const;

  const Run& run;
  const Analysis& analysis;
  const TraceJsonOptions& options;
  // The run's activities (a Kineto trace's), null when it has none.
  const Activities* activities = nullptr;
  int64_t window_start = 0, window_end = 0;
  int64_t base = 0;  // ts 0 in the file
  int64_t main_pid = 1;
  std::vector<int64_t> thread_pid, thread_tid;  // by thread index
  std::vector<Slice> slices;
  std::vector<Flow> flows;
  std::string args;                // every slice's args, one after another
  std::deque<std::string> owned;   // names made here (stable addresses)
  std::string scratch_;
  uint64_t outside_window[kNumSliceCats] = {};
  uint64_t over_cap[kNumSliceCats] = {};
  uint64_t unbound_flows = 0;  // an end had no instant free of children
  size_t clamped = 0;
  bool gpu = false;
  // Extra tracks (pid, tid) -> name, sort index: steps, Python, GPU streams,
  // Kineto threads with only runtime calls.
  std::map<std::pair<int64_t, int64_t>, std::pair<std::string, int64_t>> track_names;
  std::map<int64_t, std::pair<std::string, int64_t>> process_names;
};

// The resident-memory counter ("C") and the GC pauses ("X", cat "gc") in
// [max(base, window_start), window_end], with their tracks' names: whole
// records, ts relative to base.
std::vector<std::string> memory_events(const Run& run, int64_t pid, int64_t base, int64_t window_start,
                                       int64_t window_end);

// Each GPU's NVML counters ("C": "GPU k utilisation (%)", "GPU k memory
// (MiB)", "GPU k power (W)", "GPU k SM clock (MHz)") in the same window,
// in the main process (trace_json_nvml.cc).
std::vector<std::string> nvml_events(const Run& run, int64_t pid, int64_t base, int64_t window_start,
                                     int64_t window_end);

// A track's name and sort index ("M" records) for a synthetic tid.
void track_name(std::vector<std::string>& out, int64_t pid, int64_t tid, const char* name, int sort_index);

// The samples `keep` accepts that lie in [from, to], by time, each as
// emit(ts_ns, sample); first the last one before `from`, at `from`, so that
// a counter track starts at the window's left edge.
template <typename Sample, typename Keep, typename Emit>
void counters_in_window(const std::vector<Sample>& samples, int64_t from, int64_t to, Keep keep, Emit emit) {
  size_t n = 0;
  const Sample* before = nullptr;
  for (const Sample& s : samples) {
    if (!keep(s)) continue;
    if (s.t_ns < from) {
      before = &s;
      continue;
    }
    if (s.t_ns > to) break;
    if (n++ == 0 && before != nullptr) emit(from, *before);
    emit(s.t_ns, s);
  }
  if (n == 0 && before != nullptr && from <= to) emit(from, *before);
}

size_t nest(std::vector<Slice>& slices);
std::string cut_name(std::string_view name, size_t max_chars);
void append_us(std::string& out, int64_t ns);
char* put_us(char* p, int64_t ns);  // the same at p (at most 25 bytes); returns the end
void append_str(std::string& out, std::string_view s);
void add_arg(std::string& args, std::string_view key, std::string_view text);
void add_arg(std::string& args, std::string_view key, int64_t v);
void add_arg_ms(std::string& args, std::string_view key, int64_t ns);

}  // namespace torchneck::trace_detail
