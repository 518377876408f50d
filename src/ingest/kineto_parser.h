// The Kineto trace parser proper (internal to ingest): one simdjson DOM
// element per traceEvents entry into the Trace model, string interning, the
// [memory] running sums, metadata and the merge of a second parser's half
// (two threads). kineto_json.cc drives it: file layout, batching, errors.
#pragma once

#include <charconv>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <deque>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ingest/exact_times.h"
#include "ingest/kineto_trace.h"
#include "simdjson.h"

namespace torchneck::kineto::parser {

using detail::EventsLayout;
using detail::ExactTime;
namespace dom = simdjson::dom;
namespace od = simdjson::ondemand;

class Fail : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `s` is exactly the literal (a compare of constant length: inlined, where
// string_view's == called memcmp, a few percent of the whole parse).
template <size_t N>
inline bool is(std::string_view s, const char (&lit)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), lit, N - 1) == 0;
}

inline Cat category(std::string_view c) {
  switch (c.size()) {  // by length, then one compare: once per event
    case 5: return is(c, "Trace") ? Cat::kTrace : Cat::kOther;
    case 6:
      if (is(c, "cpu_op")) return Cat::kCpuOp;
      if (is(c, "kernel") || is(c, "Kernel")) return Cat::kKernel;
      if (is(c, "Memcpy")) return Cat::kMemcpy;
      if (is(c, "Memset")) return Cat::kMemset;
      if (is(c, "Driver")) return Cat::kDriver;
      return Cat::kOther;
    case 7: return is(c, "Runtime") ? Cat::kRuntime : Cat::kOther;
    case 8: return is(c, "Operator") ? Cat::kCpuOp : Cat::kOther;
    case 9: return is(c, "cuda_sync") ? Cat::kSync : Cat::kOther;
    case 10:
      if (is(c, "gpu_memcpy")) return Cat::kMemcpy;
      if (is(c, "gpu_memset")) return Cat::kMemset;
      return Cat::kOther;
    case 11: return is(c, "cuda_driver") ? Cat::kDriver : Cat::kOther;
    case 12: return is(c, "cuda_runtime") ? Cat::kRuntime : Cat::kOther;
    case 15:
      if (is(c, "user_annotation")) return Cat::kUserAnnotation;
      if (is(c, "python_function")) return Cat::kPythonFunction;
      return Cat::kOther;
    case 19: return is(c, "gpu_user_annotation") ? Cat::kGpuUserAnnotation : Cat::kOther;
    default: return Cat::kOther;
  }
}

// Microseconds (a JSON number) to integer nanoseconds. Below 2^53 us (year
// 2255) a double holds a microsecond timestamp to 0.25 us or better, so the
// result is within 125 ns of the text.
inline int64_t us_to_ns(dom::element v) {
  double d = 0;
  if (v.get_double().get(d) != simdjson::SUCCESS) throw Fail("a time is not a number");
  if (!std::isfinite(d) || std::fabs(d) > 9.0e15) throw Fail("a time is out of range");
  return static_cast<int64_t>(std::llround(d * 1000.0));
}

inline int64_t as_int(dom::element v) {
  if (v.is_string()) {
    const std::string_view s = v.get_string().value_unsafe();
    int64_t n = -1;
    const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');  // ROCm: "stream": "0x7f"
    const char* b = s.data() + (hex ? 2 : 0);
    const auto r = std::from_chars(b, s.data() + s.size(), n, hex ? 16 : 10);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return -1;  // not a number: unknown
    return n;
  }
  double d = 0;
  if (v.get_double().get(d) != simdjson::SUCCESS) throw Fail("a number was expected");
  if (!std::isfinite(d) || std::fabs(d) > 9.0e18) throw Fail("a number is out of range");
  return static_cast<int64_t>(d);
}

inline double as_double(dom::element v) {
  double d = 0;
  if (v.get_double().get(d) != simdjson::SUCCESS || !std::isfinite(d)) throw Fail("a number was expected");
  return d;
}

inline std::string_view as_string(dom::element v, const char* what) {
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) throw Fail(std::string(what) + " is not a string");
  return s;
}


class Parser {
 public:
  // `exact`: per traceEvents element; `first` the index of the first element
  // this parser reads. A parser for a later part of the events array
  // (`later` = true, run on another thread) keeps what depends on what came
  // before (string ids, [memory] running sums, metadata) aside for merge().
  Parser(Trace& t, const std::function<void(size_t, size_t)>& progress, size_t total,
         const std::vector<ExactTime>& exact, size_t first = 0, bool later = false)
      : t_(t), progress_(progress), total_(total), exact_(exact), index_(first), later_(later) {}

  size_t parsed() const { return index_; }
  // The events go to slots[0], slots[1]... instead of being appended (two
  // parsers filling two ranges of one array: no second copy of the events).
  std::vector<Event>& events() { return t_.events; }
  void write_to(Event* slots, size_t n) {
    slots_ = slots;
    slots_left_ = n;
  }
  size_t written() const { return written_; }
  const std::function<void(size_t, size_t)>& progress() const { return progress_; }
  // A later parser met an id it cannot tell from its own temporary ones.
  bool ambiguous() const { return ambiguous_; }

  // Appends what a later parser read (the elements right after ours), as
  // if this parser had read them itself.
  void merge(Parser& o) {
    std::vector<uint32_t> name_id(o.t_.names.size());
    for (size_t i = 0; i < o.t_.names.size(); ++i) name_id[i] = intern(o.t_.names[i]);
    std::vector<int64_t> string_id(o.later_strings_.size());
    for (size_t i = 0; i < o.later_strings_.size(); ++i) string_id[i] = string_id_of(o.later_strings_[i]);
    auto id = [&](int64_t v) {
      return v >= kLaterIds && v < kLaterIds + static_cast<int64_t>(string_id.size()) ? string_id[static_cast<size_t>(v - kLaterIds)] : v;
    };
    // Ours are t_.events[0, written_), the other's [o_first, o_first + o.written_):
    // moved down behind ours.
    const size_t o_first = static_cast<size_t>(o.slots_ - t_.events.data());
    for (size_t i = 0; i < o.written_; ++i) {
      Event& e = t_.events[written_ + i];
      e = t_.events[o_first + i];
      e.name = name_id[e.name];
      e.pid = id(e.pid);
      e.tid = id(e.tid);
      e.stream = id(e.stream);
    }
    t_.events.resize(written_ + o.written_);
    slots_ = nullptr;
    for (Flow f : o.t_.flows) {
      f.id = id(f.id);
      f.pid = id(f.pid);
      f.tid = id(f.tid);
      t_.flows.push_back(f);
    }
    for (const auto& m : o.later_memory_) apply_memory(m);
    for (const auto& m : o.later_meta_) meta(m.process, id(m.pid), id(m.tid), m.name);
    index_ = o.index_;
  }
  // The events, one parsed document each (see parse_padded).
  void event_element(dom::element item) {
    dom::object o;
    if (item.get_object().get(o) != simdjson::SUCCESS) throw Fail("an entry of \"traceEvents\" is not an object");
    event(o);
    ++index_;
  }
  // The rest of the top-level object, with the events array blanked out.
  // An integer (Kineto writes one); a number that is not is ignored.
  void base_time(dom::element v) {
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    if (v.get_int64().get(i) == simdjson::SUCCESS) t_.base_time_ns = i;
    else if (v.get_uint64().get(u) == simdjson::SUCCESS && u <= static_cast<uint64_t>(INT64_MAX)) t_.base_time_ns = static_cast<int64_t>(u);
    else if (v.get_double().get(d) == simdjson::SUCCESS && d >= 0 && d < 9.2e18) t_.base_time_ns = static_cast<int64_t>(d);
  }

  void top_level(dom::element root) {
    dom::object top;
    if (root.get_object().get(top) != simdjson::SUCCESS) throw Fail("the top level is not a JSON object");
    for (auto [key, v] : top) {
      if (key == "deviceProperties") {
        dom::array a;
        if (v.get_array().get(a) == simdjson::SUCCESS) devices(a);
      } else if (key == "distributedInfo") {
        dom::object o;
        if (v.get_object().get(o) == simdjson::SUCCESS) distributed(o);
      } else if (key == "baseTimeNanoseconds") {
        base_time(v);
      }
    }
  }

  void document(dom::element root) {
    dom::object top;
    if (root.get_object().get(top) != simdjson::SUCCESS) throw Fail("the top level is not a JSON object");
    bool have_events = false;
    for (auto [key, v] : top) {
      if (key == "traceEvents") {
        dom::array a;
        if (v.get_array().get(a) != simdjson::SUCCESS) throw Fail("\"traceEvents\" is not an array");
        events(a);
        have_events = true;
      } else if (key == "deviceProperties") {
        dom::array a;
        if (v.get_array().get(a) == simdjson::SUCCESS) devices(a);
      } else if (key == "distributedInfo") {
        dom::object o;
        if (v.get_object().get(o) == simdjson::SUCCESS) distributed(o);
      } else if (key == "baseTimeNanoseconds") {
        base_time(v);
      }
    }
    if (!have_events) throw Fail("no \"traceEvents\": not a Chrome-trace / torch.profiler trace");
  }

 private:
  // A later parser numbers the names it meets from here, in order of first
  // appearance, and merge() maps them to the ids they get in file order.
  static constexpr int64_t kLaterIds = INT64_MIN;
  static constexpr int64_t kLaterIdsEnd = INT64_MIN + (int64_t{1} << 40);

  int64_t id_of(dom::element v) {
    if (!v.is_string()) return checked(as_int(v));
    std::string_view s = v.get_string().value_unsafe();
    int64_t n = 0;
    std::string_view digits = s;
    if (digits.rfind("stream ", 0) == 0) digits.remove_prefix(7);
    const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (r.ec == std::errc() && r.ptr == digits.data() + digits.size()) return checked(n);
    // A name ("Spans", "Traces"): a stable negative id per distinct name.
    key_.assign(s);
    if (later_) {
      auto it = later_ids_.find(key_);
      if (it != later_ids_.end()) return it->second;
      const int64_t id = kLaterIds + static_cast<int64_t>(later_strings_.size());
      later_strings_.push_back(key_);
      later_ids_.emplace(key_, id);
      return id;
    }
    return string_id_of(key_);
  }
  int64_t string_id_of(const std::string& s) {
    auto it = string_ids_.find(s);
    if (it != string_ids_.end()) return it->second;
    const int64_t id = -1 - static_cast<int64_t>(string_ids_.size());
    string_ids_.emplace(s, id);
    return id;
  }
  // A number in the range of a later parser's temporary ids (only a string
  // of digits can give one): that parser's work is redone in order.
  int64_t checked(int64_t n) {
    if (later_ && n < kLaterIdsEnd) ambiguous_ = true;
    return n;
  }

  // A name costs one hash per event and an allocation only the first time:
  // the map's keys are views into name_store_ (a deque: stable addresses;
  // the parser's own string buffer is reused from batch to batch).
  uint32_t intern(std::string_view s) {
    auto it = name_ids_.find(s);
    if (it != name_ids_.end()) return it->second;
    const auto id = static_cast<uint32_t>(t_.names.size());
    t_.names.emplace_back(s);
    name_store_.emplace_back(s);
    name_ids_.emplace(std::string_view(name_store_.back()), id);
    return id;
  }

  // Keys by length first: one or two short compares per field instead of a
  // chain of string compares (the event loop's main cost).
  static void args(dom::object a, Event& e) {
    for (auto [k, v] : a) {
      if (v.is_null()) continue;
      switch (k.size()) {
        case 4:
          if (is(k, "grid")) grid_or_block(v, e.grid);
          break;
        case 5:
          if (is(k, "bytes")) e.bytes = as_int(v);
          else if (is(k, "block")) grid_or_block(v, e.block);
          break;
        case 6:
          if (is(k, "device") || is(k, "Device")) e.device = as_int(v);
          else if (is(k, "stream")) e.stream = as_int(v);
          break;
        case 11:
          if (is(k, "External id") || is(k, "external id")) e.external_id = as_int(v);
          else if (is(k, "correlation")) e.correlation = as_int(v);
          break;
        case 12:
          if (is(k, "warps per SM")) e.warps_per_sm = as_double(v);
          break;
        case 13:
          if (is(k, "Fwd thread id")) e.fwd_tid = as_int(v);
          else if (is(k, "shared memory")) e.shared_memory = as_int(v);
          else if (is(k, "blocks per SM")) e.blocks_per_sm = as_double(v);
          break;
        case 15:
          if (is(k, "Sequence number")) e.seq_nr = as_int(v);
          break;
        case 20:
          if (is(k, "registers per thread")) e.registers_per_thread = static_cast<int32_t>(as_int(v));
          break;
        case 25:
          if (is(k, "est. achieved occupancy %")) e.est_occupancy = as_double(v);
          break;
        default:
          break;
      }
    }
  }

  static void grid_or_block(dom::element v, int32_t* dst) {
    dom::array xs;
    if (v.get_array().get(xs) != simdjson::SUCCESS) return;
    size_t n = 0;
    for (dom::element x : xs) {
      if (n < 3) dst[n] = static_cast<int32_t>(std::clamp<int64_t>(as_int(x), 0, INT32_MAX));
      ++n;
    }
  }

  void event(dom::object o) {
    Event e;
    std::string_view ph, cat, name, meta_name;
    bool have_ts = false, have_id = false;
    int64_t flow_id = 0;
    dom::object arg_object;
    bool have_args = false;
    // The text's own nanoseconds, where the scan read them: then the DOM's
    // number (a blanked 0) is not converted at all.
    const bool exact_ts = index_ < exact_.size() && exact_[index_].ts_ns != INT64_MIN;
    const bool exact_dur = index_ < exact_.size() && exact_[index_].dur_ns != INT64_MIN;
    for (auto [k, v] : o) {
      const size_t n = k.size();
      if (n < 2 || n > 4) continue;
      const char c0 = k[0], c1 = k[1];
      if (n == 2) {
        if (c0 == 'p' && c1 == 'h') ph = as_string(v, "\"ph\"");
        else if (c0 == 't' && c1 == 's') {
          e.ts_ns = exact_ts && v.is_number() ? exact_[index_].ts_ns : us_to_ns(v);
          have_ts = true;
        } else if (c0 == 'i' && c1 == 'd') {
          flow_id = id_of(v);
          have_id = true;
        }
      } else if (n == 3) {
        const char c2 = k[2];
        if (c0 == 'c' && c1 == 'a' && c2 == 't') cat = as_string(v, "\"cat\"");
        else if (c0 == 'p' && c1 == 'i' && c2 == 'd') e.pid = id_of(v);
        else if (c0 == 't' && c1 == 'i' && c2 == 'd') e.tid = id_of(v);
        else if (c0 == 'd' && c1 == 'u' && c2 == 'r') e.dur_ns = exact_dur && v.is_number() ? exact_[index_].dur_ns : us_to_ns(v);
      } else {
        if (is(k, "name")) name = v.is_string() ? v.get_string().value_unsafe() : std::string_view();
        else if (is(k, "args")) have_args = v.get_object().get(arg_object) == simdjson::SUCCESS;
      }
    }
    if (exact_dur) e.dur_ns = exact_[index_].dur_ns;  // as before: also without a "dur" key the DOM saw
    if (ph == "X") {
      if (!have_ts) throw Fail("a complete event (\"ph\":\"X\") has no \"ts\"");
      if (e.dur_ns < 0) throw Fail("an event has a negative duration");
      if (e.ts_ns > INT64_MAX - e.dur_ns || e.ts_ns < -INT64_MAX / 2) throw Fail("an event's time is out of range");
      if (have_args) args(arg_object, e);
      e.cat = category(cat);
      e.name = intern(name);
      if (later_ && e.stream < kLaterIdsEnd) ambiguous_ = true;  // merge() could not tell it from a tid's id
      if (is_gpu_work(e.cat) && e.stream < 0) e.stream = e.tid;
      if (slots_ != nullptr) {
        if (slots_left_ == 0) throw Fail("more complete events than the scan counted");  // caller: one pass
        --slots_left_;
        slots_[written_++] = e;
      } else {
        t_.events.push_back(e);
      }
    } else if ((ph == "s" || ph == "f") && have_id) {
      Flow f;
      f.id = flow_id;
      f.start = ph == "s";
      f.cat = cat == "fwdbwd" ? FlowCat::kFwdBwd : (cat == "ac2g" || cat == "async" || cat == "async_gpu") ? FlowCat::kAc2g : FlowCat::kOther;
      f.ts_ns = e.ts_ns;
      f.pid = e.pid;
      f.tid = e.tid;
      t_.flows.push_back(f);
    } else if (ph == "i" && name == "[memory]" && have_args) {
      memory(arg_object, e.ts_ns);
    } else if (ph == "M" && have_args) {
      for (auto [k, v] : arg_object)
        if (k == "name" && v.is_string()) meta_name = v.get_string().value_unsafe();
      const bool process = name == "process_name";
      if (!process && name != "thread_name") return;
      if (later_) later_meta_.push_back({process, e.pid, e.tid, std::string(meta_name)});
      else meta(process, e.pid, e.tid, std::string(meta_name));
    }
  }

  void meta(bool process, int64_t pid, int64_t tid, std::string name) {
    if (process) t_.process_names[pid] = std::move(name);
    else t_.thread_names[{pid, tid}] = std::move(name);
  }

  struct MemoryEvent {
    int64_t ts_ns, type, device, bytes, allocated, reserved;
  };
  struct MetaEvent {
    bool process;
    int64_t pid, tid;
    std::string name;
  };

  void memory(dom::object a, int64_t ts_ns) {
    int64_t type = -1, device = -1, bytes = 0, allocated = -1, reserved = -1;
    for (auto [k, v] : a) {
      if (!v.is_number()) continue;
      if (k == "Device Type") type = as_int(v);
      else if (k == "Device Id") device = as_int(v);
      else if (k == "Bytes") bytes = as_int(v);
      else if (k == "Total Allocated") allocated = as_int(v);
      else if (k == "Total Reserved") reserved = as_int(v);
    }
    if (later_) later_memory_.push_back({ts_ns, type, device, bytes, allocated, reserved});
    else apply_memory({ts_ns, type, device, bytes, allocated, reserved});
  }

  void apply_memory(const MemoryEvent& x) {
    const auto [ts_ns, type, device, bytes, allocated, reserved] = x;
    if (type != 1 || device < 0) return;  // c10::DeviceType CUDA (ROCm reports as CUDA)
    MemoryUse& m = t_.device_memory[device];
    ++m.events;
    m.running += bytes;
    if (allocated >= 0) {
      m.has_totals = true;
      m.peak_allocated = std::max(m.peak_allocated, allocated);
      m.peak_reserved = std::max(m.peak_reserved, reserved);
    } else if (!m.has_totals) {
      m.peak_allocated = std::max(m.peak_allocated, m.running);
    }
    // The allocated memory over time, as a counter: the total where the
    // trace gives it, else the running sum (relative to the trace's start).
    CounterSeries* c = nullptr;
    for (CounterSeries& x : t_.counters)
      if (x.device == device) c = &x;
    if (c == nullptr) {
      t_.counters.push_back({"device memory allocated (bytes)", device, {}});
      c = &t_.counters.back();
    }
    c->samples.push_back({ts_ns, allocated >= 0 ? allocated : m.running});
  }

  void events(dom::array a) {
    size_t n = 0;
    const size_t count = a.size();
    t_.events.reserve(count);
    for (dom::element item : a) {
      dom::object o;
      if (item.get_object().get(o) != simdjson::SUCCESS) throw Fail("an entry of \"traceEvents\" is not an object");
      event(o);
      ++index_;
      if (progress_ && (++n & 0x3FFF) == 0) progress_(total_ / 2 + total_ / 2 * n / std::max<size_t>(1, count), total_);
    }
  }

  void devices(dom::array a) {
    for (dom::element item : a) {
      dom::object o;
      if (item.get_object().get(o) != simdjson::SUCCESS) continue;
      Device d;
      for (auto [k, v] : o) {
        if (k == "name") {
          if (v.is_string()) d.name = std::string(v.get_string().value_unsafe());
          continue;
        }
        if (!v.is_number()) continue;
        if (k == "id") d.id = as_int(v);
        else if (k == "totalGlobalMem") d.total_global_mem = as_int(v);
        else if (k == "computeMajor") d.compute_major = as_int(v);
        else if (k == "computeMinor") d.compute_minor = as_int(v);
        else if (k == "maxThreadsPerBlock") d.max_threads_per_block = as_int(v);
        else if (k == "maxThreadsPerMultiprocessor") d.max_threads_per_sm = as_int(v);
        else if (k == "regsPerBlock") d.regs_per_block = as_int(v);
        else if (k == "regsPerMultiprocessor") d.regs_per_sm = as_int(v);
        else if (k == "warpSize") d.warp_size = as_int(v);
        else if (k == "sharedMemPerBlock") d.shared_mem_per_block = as_int(v);
        else if (k == "sharedMemPerMultiprocessor") d.shared_mem_per_sm = as_int(v);
        else if (k == "numSms") d.num_sms = as_int(v);
      }
      t_.devices.push_back(std::move(d));
    }
  }

  void distributed(dom::object o) {
    for (auto [k, v] : o) {
      if (k == "rank" && v.is_number()) t_.rank.rank = as_int(v);
      else if (k == "world_size" && v.is_number()) t_.rank.world_size = as_int(v);
      else if (k == "backend" && v.is_string()) t_.rank.backend = std::string(v.get_string().value_unsafe());
    }
  }

  std::string key_;  // reused lookup key
  Trace& t_;
  const std::function<void(size_t, size_t)>& progress_;
  size_t total_;
  const std::vector<ExactTime>& exact_;  // per traceEvents element
  Event* slots_ = nullptr;
  size_t slots_left_ = 0;
  size_t written_ = 0;
  size_t index_ = 0;             // of the element being read
  bool later_ = false;
  bool ambiguous_ = false;
  std::unordered_map<std::string, int64_t> string_ids_;
  std::unordered_map<std::string, int64_t> later_ids_;  // a later parser's temporary ids
  std::vector<std::string> later_strings_;
  std::vector<MemoryEvent> later_memory_;
  std::vector<MetaEvent> later_meta_;
  std::deque<std::string> name_store_;
  std::unordered_map<std::string_view, uint32_t> name_ids_;
};

}  // namespace torchneck::kineto::parser
