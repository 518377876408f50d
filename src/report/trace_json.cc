#include "report/trace_json.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/timing.h"
#include "report/appendf.h"
#include "report/json_writer.h"
#include "report/trace_json_internal.h"

namespace torchneck {
namespace trace_detail {

const char* slice_cat_name(SliceCat c) {
  switch (c) {
    case SliceCat::kStep: return "step";
    case SliceCat::kPhase: return "phase";
    case SliceCat::kModule: return "module";
    case SliceCat::kUserScope: return "user_scope";
    case SliceCat::kOperator: return "operator";
    case SliceCat::kBackward: return "backward";
    case SliceCat::kTorchScript: return "torchscript";
    case SliceCat::kRuntime: return "cuda_runtime";
    case SliceCat::kPython: return "python";
    case SliceCat::kSample: return "python_sampled";
    case SliceCat::kKernel: return "kernel";
    case SliceCat::kMemcpy: return "gpu_memcpy";
    case SliceCat::kMemset: return "gpu_memset";
  }
  return "other";
}

// Under the event cap, lower goes first.
int priority(SliceCat c) {
  switch (c) {
    case SliceCat::kStep:
    case SliceCat::kPhase: return 0;
    case SliceCat::kModule:
    case SliceCat::kUserScope: return 1;
    case SliceCat::kOperator:
    case SliceCat::kBackward:
    case SliceCat::kTorchScript: return 2;
    case SliceCat::kRuntime:
    case SliceCat::kKernel:
    case SliceCat::kMemcpy:
    case SliceCat::kMemset: return 3;
    case SliceCat::kPython:
    case SliceCat::kSample: return 4;
  }
  return 5;
}

// Identical spans: which one is drawn outside.
uint8_t rank(SliceCat c) {
  switch (c) {
    case SliceCat::kStep: return 0;
    case SliceCat::kPhase: return 1;
    case SliceCat::kUserScope: return 2;
    case SliceCat::kModule: return 3;
    default: return 4;
  }
}

std::string cut_name(std::string_view name, size_t max_chars) {
  if (name.size() <= max_chars) return std::string(name);
  size_t n = max_chars;
  while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0) == 0x80) --n;  // whole UTF-8 characters
  return std::string(name.substr(0, n)) + "...";
}

// Microseconds with three decimals at p (at most 25 bytes); to_chars, not
// printf: a trace has hundreds of thousands of these.
char* put_us(char* p, int64_t ns) {
  if (ns < 0) {
    *p++ = '-';
    ns = -ns;
  }
  p = std::to_chars(p, p + 24, ns / 1000).ptr;
  const int64_t frac = ns % 1000;
  *p++ = '.';
  *p++ = static_cast<char>('0' + frac / 100);
  *p++ = static_cast<char>('0' + frac / 10 % 10);
  *p++ = static_cast<char>('0' + frac % 10);
  return p;
}

void append_us(std::string& out, int64_t ns) {
  char buf[32];
  out.append(buf, put_us(buf, ns));
}

void append_int(std::string& out, int64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void append_str(std::string& out, std::string_view s) {
  out += '"';
  append_json_escaped(out, s);
  out += '"';
}

void add_arg(std::string& args, std::string_view key, std::string_view text) {
  if (!args.empty()) args += ',';
  append_str(args, key);
  args += ':';
  append_str(args, text);
}

void add_arg(std::string& args, std::string_view key, int64_t v) {
  if (!args.empty()) args += ',';
  append_str(args, key);
  args += ':';
  append_int(args, v);
}

void add_arg_ms(std::string& args, std::string_view key, int64_t ns) {
  if (!args.empty()) args += ',';
  append_str(args, key);
  appendf(args, ":%.3f", static_cast<double>(ns) / 1e6);
}

// A flow end sits mid-way in a stretch of its slice no child covers, at
// least this long, so that a viewer reading microseconds through a double
// (1 ns off) still finds it inside that stretch.
constexpr int64_t kMinFreeNs = 4;

// Sorts each track's slices (start, longer first, outer rank first), clamps
// partial overlaps to the parent's end, and finds for each slice an instant
// that no child covers, where a flow arrow binds to it and not to a child.
// Sorted as indices, then each slice moved once into place: sorting the
// slices themselves swapped ~100-byte structs log n times each.
void sort_slices(std::vector<Slice>& slices) {
  auto less = [&slices](uint32_t i, uint32_t j) {
    const Slice &a = slices[i], &b = slices[j];
    if (a.pid != b.pid) return a.pid < b.pid;
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end > b.end;
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.depth != b.depth) return a.depth < b.depth;
    return i < j;
  };
  bool sorted = true;
  for (size_t i = 1; i < slices.size() && sorted; ++i)
    sorted = !less(static_cast<uint32_t>(i), static_cast<uint32_t>(i - 1));
  if (sorted) return;
  // The order as indices (4 bytes a slice; keys holding the compared fields
  // were 48, 2.5 MB at tiny_ops' end with a GPU window, on top of the
  // slices at the run's peak).
  std::vector<uint32_t> order(slices.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(), less);
  // Put in order in place, one cycle of the permutation at a time: each
  // slice (plain data, ~100 bytes) moves once. Gathered into a second array
  // instead, the slices were held twice at the peak of the run's end
  // (trace.json's ~52,000 slices on tiny_ops with a GPU window: ~5 MB).
  // order[i] is the slice that goes to i; it is marked done by setting it
  // to i.
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] == i) continue;
    Slice held = std::move(slices[i]);
    size_t to = i;
    while (order[to] != i) {
      const size_t from = order[to];
      slices[to] = std::move(slices[from]);
      order[to] = static_cast<uint32_t>(to);
      to = from;
    }
    slices[to] = std::move(held);
    order[to] = static_cast<uint32_t>(to);
  }
}

size_t nest(std::vector<Slice>& slices) {
  sort_slices(slices);
  struct Open {
    size_t index;
    int64_t cursor;  // end of the last direct child
  };
  std::vector<Open> stack;
  size_t clamped = 0;
  auto close = [&](Open o) {
    Slice& s = slices[o.index];
    if (s.free_point < 0 && s.end - o.cursor >= kMinFreeNs) s.free_point = o.cursor + (s.end - o.cursor) / 2;
    if (!stack.empty()) stack.back().cursor = std::max(stack.back().cursor, s.end);
  };
  for (size_t i = 0; i < slices.size(); ++i) {
    Slice& s = slices[i];
    s.free_point = -1;
    if (!stack.empty()) {
      const Slice& top = slices[stack.back().index];
      if (top.pid != s.pid || top.tid != s.tid) {
        while (!stack.empty()) {
          const Open o = stack.back();
          stack.pop_back();
          close(o);
        }
      }
    }
    while (!stack.empty() && slices[stack.back().index].end <= s.start) {
      const Open o = stack.back();
      stack.pop_back();
      close(o);
    }
    if (!stack.empty()) {
      Open& parent = stack.back();
      Slice& p = slices[parent.index];
      if (s.end > p.end) {
        s.end = p.end;
        s.clamped = true;
        ++clamped;
      }
      if (p.free_point < 0 && s.start - parent.cursor >= kMinFreeNs) p.free_point = parent.cursor + (s.start - parent.cursor) / 2;
    }
    stack.push_back(Open{i, s.start});
  }
  while (!stack.empty()) {
    const Open o = stack.back();
    stack.pop_back();
    close(o);
  }
  return clamped;
}

}  // namespace trace_detail

using namespace trace_detail;

namespace {

// Window bounds from the steps: the first step through the options.steps-th
// steady one (at most 2 x options.steps steps). Events before the first step
// (model set-up) are kept: the collectors' own windows bound them.
struct Window {
  int64_t start = std::numeric_limits<int64_t>::min();
  int64_t end = std::numeric_limits<int64_t>::max();
  size_t steps = 0;  // steps in the window
  bool limited = false;
  bool overlaps(int64_t s, int64_t e) const { return s < end && e > start; }
};

Window choose_window(const StepAnalysis& sa, int64_t max_steady) {
  Window w;
  w.steps = sa.steps.size();
  if (sa.steps.empty() || max_steady <= 0) return w;
  const size_t limit = static_cast<size_t>(max_steady);
  size_t steady = 0, last = 0;
  for (size_t i = 0; i < sa.steps.size(); ++i) {
    last = i;
    // A detailed step left out of the statistics for the detail's cost
    // (steps.h) is shown: the window is where the operators are.
    if ((sa.steps[i].steady || sa.steps[i].detail_excluded) && ++steady >= limit) break;
  }
  last = std::min(last, 2 * limit - 1);
  if (last + 1 >= sa.steps.size()) return w;  // the whole timeline fits
  w.end = sa.steps[last].end_ns;
  w.steps = last + 1;
  w.limited = true;
  return w;
}

}  // namespace

std::string trace_json(const Run& run, const Analysis& analysis, const TraceJsonOptions& o) {
  std::string all;
  trace_json(run, analysis, o, [&all](std::string_view piece) { all.append(piece); });
  return all;
}

namespace {

// trace.json's bytes: stored through a pointer into one buffer, handed on
// to the sink whenever it passes `piece`. Each record makes sure of its room
// once (room), then writes without checks (a slice was a dozen appends to a
// std::string, each checking its capacity: most of the time to write it).
class Out {
 public:
  Out(const std::function<void(std::string_view)>& sink, size_t piece) : sink_(sink), piece_(piece), buf_(2 * piece) {}
  char* room(size_t n) {
    if (len_ + n > buf_.size()) {
      flush();
      if (n > buf_.size()) buf_.resize(n);
    }
    return buf_.data() + len_;
  }
  void done(char* end) {
    len_ = static_cast<size_t>(end - buf_.data());
    if (len_ >= piece_) flush();
  }
  void append(std::string_view s) {
    char* p = room(s.size());
    std::memcpy(p, s.data(), s.size());
    done(p + s.size());
  }
  void flush() {
    if (len_ > 0) sink_(std::string_view(buf_.data(), len_));
    len_ = 0;
  }

 private:
  const std::function<void(std::string_view)>& sink_;
  size_t piece_;
  size_t len_ = 0;
  std::vector<char> buf_;
};

// A record's room beyond its name and args: its literal parts, a category
// and five numbers (generous).
constexpr size_t kRecordRoom = 256;

char* put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}
char* put_int(char* p, int64_t v) { return std::to_chars(p, p + 24, v).ptr; }
// ,"pid":P,"tid":T,"ts":US
char* put_where(char* p, int64_t pid, int64_t tid, int64_t ts_ns) {
  p = put(p, ",\"pid\":");
  p = put_int(p, pid);
  p = put(p, ",\"tid\":");
  p = put_int(p, tid);
  p = put(p, ",\"ts\":");
  return put_us(p, ts_ns);
}
// As append_str: quoted, escaped (at most 6 bytes a byte, plus the quotes).
char* put_str(char* p, std::string_view s, std::string& scratch) {
  *p++ = '"';
  if (is_json_plain(s)) {
    p = put(p, s);
  } else {
    scratch.clear();
    append_json_escaped(scratch, s);
    p = put(p, scratch);
  }
  *p++ = '"';
  return p;
}

}  // namespace

void trace_json(const Run& run, const Analysis& analysis, const TraceJsonOptions& o,
                const std::function<void(std::string_view)>& sink) {
  TraceBuilder b(run, analysis, o);
  const Window w = choose_window(analysis.steps, o.steps);
  b.window_start = w.start;
  b.window_end = w.end;
  b.reserve_slices(w.steps);
  b.add_steps(w.steps);
  b.add_timeline();
  b.add_modules();
  b.add_python_frames();
  b.add_samples();
  if (b.activities != nullptr) b.add_gpu(*b.activities);
  b.apply_cap();
  if (o.base_ns != INT64_MIN) b.base = o.base_ns;
  timing_phase("trace.json: slices", 2);
  b.clamped = nest(b.slices);
  timing_phase("trace.json: nest", 2);
  b.add_flows();
  timing_phase("trace.json: flows", 2);

  // Written in pieces: one buffer, handed on whenever it passes kPiece.
  constexpr size_t kPiece = 256 * 1024;
  Out out(sink, kPiece);
  if (!o.fragment) out.append("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  const int64_t off = o.pid_offset;
  bool first = true;
  auto sep = [&first](char* p) {
    if (!first) p = put(p, ",\n");
    first = false;
    return p;
  };
  for (const std::string& m : b.metadata_events()) {
    char* p = sep(out.room(m.size() + 2));
    out.done(put(p, m));
  }
  std::string scratch;
  for (const Slice& s : b.slices) {
    const std::string_view args = b.args_of(s);
    char* p = sep(out.room(kRecordRoom + 6 * s.name.size() + args.size()));
    p = put(p, "{\"ph\":\"X\",\"cat\":\"");
    p = put(p, std::string_view(slice_cat_name(s.cat)));
    p = put(p, "\",\"name\":");
    p = put_str(p, s.name, scratch);
    p = put_where(p, s.pid + off, s.tid, s.start - b.base);
    p = put(p, ",\"dur\":");
    p = put_us(p, s.end - s.start);
    if (s.args_size > 0 || s.clamped) {
      p = put(p, ",\"args\":{");
      p = put(p, args);
      if (s.clamped) p = s.args_size == 0 ? put(p, "\"clamped\":true") : put(p, ",\"clamped\":true");
      *p++ = '}';
    }
    *p++ = '}';
    out.done(p);
  }
  for (const Flow& f : b.flows) {
    const std::string_view cat(f.cat);
    for (int end = 0; end < 2; ++end) {
      const Slice& s = b.slices[end == 0 ? f.from : f.to];
      char* p = sep(out.room(kRecordRoom + 2 * cat.size()));
      p = put(p, end == 0 ? std::string_view("{\"ph\":\"s\",\"id\":") : std::string_view("{\"ph\":\"f\",\"id\":"));
      p = put_int(p, static_cast<int64_t>(f.id));
      p = put(p, ",\"cat\":\"");
      p = put(p, cat);
      p = put(p, "\",\"name\":\"");
      p = put(p, cat);
      p = put(p, "\",\"bp\":\"e\"");
      p = put_where(p, s.pid + off, s.tid, s.free_point - b.base);
      *p++ = '}';
      out.done(p);
    }
  }
  const std::vector<std::string> memory = memory_events(run, b.main_pid + off, b.base, w.start, w.end);
  const std::vector<std::string> nvml = nvml_events(run, b.main_pid + off, b.base, w.start, w.end);
  for (const auto* events : {&memory, &nvml})
    for (const std::string& m : *events) {
      char* p = sep(out.room(m.size() + 2));
      out.done(put(p, m));
    }
  std::string tail;
  if (w.limited) {
    if (!first) tail += ",\n";
    std::string args;
    add_arg(args, "steps_in_window", static_cast<int64_t>(w.steps));
    add_arg(args, "steps_in_run", static_cast<int64_t>(analysis.steps.count));
    tail += "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"window\",\"name\":";
    append_str(tail, "trace window ends (--trace-steps): later steps left out");
    appendf(tail, ",\"pid\":%lld,\"tid\":%lld,\"ts\":", static_cast<long long>(b.main_pid + off),
            static_cast<long long>(kStepsTid));
    append_us(tail, w.end - b.base);
    tail += ",\"args\":{" + args + "}}";
  }
  if (o.fragment) {
    out.append(tail);
    out.flush();
    return;
  }
  tail += "\n],\n\"otherData\":";
  tail += b.other_data(w.steps, w.limited, analysis.steps.count);
  tail += "}\n";
  out.append(tail);
  out.flush();
}

void ranks_trace_json(const std::vector<RankTrace>& ranks, const std::string& clock, const TraceJsonOptions& options,
                      const std::function<void(std::string_view)>& sink) {
  // ts 0: the earliest event of any rank, on the first rank's clock.
  int64_t base = INT64_MAX;
  for (const RankTrace& r : ranks) {
    const Run& run = *r.run;
    int64_t lo = INT64_MAX;
    if (!run.timeline.empty()) lo = run.timeline.front().start_ns;
    if (!r.analysis->steps.steps.empty()) lo = std::min(lo, r.analysis->steps.steps.front().start_ns);
    if (!run.activities.events.empty()) lo = std::min(lo, run.activities.events.front().ts_ns);
    if (lo != INT64_MAX) base = std::min(base, lo + r.offset_ns);
  }
  if (base == INT64_MAX) base = 0;
  sink("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  bool any = false;
  // pid_max on Linux is at most 2^22: each rank's pids, its GPUs' among them
  // (kGpuPidBase + device), move by a multiple of it and stay distinct.
  constexpr int64_t kPidSpan = int64_t{1} << 22;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankTrace& r = ranks[i];
    TraceJsonOptions o = options;
    o.max_events = std::max<size_t>(1000, options.max_events / std::max<size_t>(1, ranks.size()));
    o.base_ns = base - r.offset_ns;
    o.pid_offset = static_cast<int64_t>(i) * kPidSpan;
    o.label = "rank " + std::to_string(r.run->rank.rank);
    o.sort_offset = static_cast<int64_t>(i) * 100000;
    o.fragment = true;
    bool started = false;
    trace_json(*r.run, *r.analysis, o, [&](std::string_view piece) {
      if (piece.empty()) return;
      if (!started && any) sink(",\n");
      started = any = true;
      sink(piece);
    });
  }
  JsonWriter w;
  w.begin_object();
  w.field("tool", "torchneck");
  w.field("format", "torchneck.trace/1");
  w.field("ranks", static_cast<uint64_t>(ranks.size()));
  w.field("ts_base_ns", base);
  w.field("time", "ts and dur are microseconds since ts_base_ns on the first rank's clock; each rank's times are "
                  "moved onto it as the clock line says");
  w.field("clock", clock);
  w.key("clock_offset_ns").begin_array();
  for (const RankTrace& r : ranks) w.value(r.offset_ns);
  w.end_array();
  w.end_object();
  sink("\n],\n\"otherData\":" + w.str() + "}\n");
}

}  // namespace torchneck
