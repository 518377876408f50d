// What goes on which track of trace.json (report/trace_json.h).
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <set>
#include <unordered_map>

#include "core/stats.h"
#include "report/appendf.h"
#include "report/json_writer.h"
#include "report/trace_json_internal.h"

namespace torchneck::trace_detail {

namespace {

bool is_cpu_side(ActivityKind c) {
  return c == ActivityKind::kCpuOp || c == ActivityKind::kUserAnnotation || c == ActivityKind::kRuntime ||
         c == ActivityKind::kPythonFunction;
}

SliceCat cat_of(OpKind k) {
  switch (k) {
    case OpKind::kBackward: return SliceCat::kBackward;
    case OpKind::kUserScope: return SliceCat::kUserScope;
    case OpKind::kTorchScript: return SliceCat::kTorchScript;
    default: return SliceCat::kOperator;
  }
}

const char* phase_label(Phase p) {
  switch (p) {
    case Phase::kData: return "data wait";
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
    case Phase::kEvaluation: return "evaluation";
    default: return "other";
  }
}

std::string thread_label(const Run& run, uint32_t t) {
  if (t < run.threads.size() && !run.threads[t].name.empty()) return run.threads[t].name;
  if (t == run.main_thread) return "MainThread";
  if (t < run.threads.size() && run.threads[t].os_tid != 0) return "thread " + std::to_string(run.threads[t].os_tid);
  return "thread #" + std::to_string(t);
}

}  // namespace

TraceBuilder::TraceBuilder(const Run& r, const Analysis& a, const TraceJsonOptions& o)
    : run(r), analysis(a), options(o),
      activities(r.activities.empty() && r.activities.source.empty() ? nullptr : &r.activities) {
  if (o.pid > 0) main_pid = o.pid;
  else if (!run.processes.empty() && run.processes.front().pid > 0) main_pid = run.processes.front().pid;
  // Kineto: each thread's process is the one its CPU events carry.
  std::unordered_map<int64_t, int64_t> pid_of_tid;
  if (activities != nullptr) {
    for (const Activity& e : activities->events)
      if (is_cpu_side(e.cat)) pid_of_tid.emplace(e.tid, e.pid);
  }
  std::set<std::pair<int64_t, int64_t>> used;
  for (uint32_t t = 0; t < run.threads.size(); ++t) {
    int64_t tid = static_cast<int64_t>(run.threads[t].os_tid);
    int64_t pid = main_pid;
    auto it = pid_of_tid.find(tid);
    if (it != pid_of_tid.end()) pid = it->second;
    if (tid <= 0 || tid >= kStepsTid || used.count({pid, tid}) > 0) tid = 500000000 + t;  // unknown or clashing
    used.insert({pid, tid});
    thread_pid.push_back(pid);
    thread_tid.push_back(tid);
  }
  if (activities != nullptr && run.main_thread < thread_pid.size()) main_pid = thread_pid[run.main_thread];
}

int64_t TraceBuilder::pid_of(uint32_t t) const { return t < thread_pid.size() ? thread_pid[t] : main_pid; }
int64_t TraceBuilder::tid_of(uint32_t t) const {
  return t < thread_tid.size() ? thread_tid[t] : 500000000 + static_cast<int64_t>(t);
}

// Each thread's Python track right below the thread's own.
int64_t TraceBuilder::python_sort_index(uint32_t t) const {
  return t == run.main_thread ? 2 : 11 + 2 * static_cast<int64_t>(t);
}

void TraceBuilder::reserve_slices(size_t steps_in_window) {
  // One allocation for the slices: growing by doubling would move them all
  // several times, and touch fresh pages each time. Sized by what falls in
  // the window (the first steps, by default): sized by the whole run it was
  // ~12 MB at tiny_ops' end, almost all of it never used.
  const auto inside = [this](int64_t start, int64_t end) { return overlaps_window(start, end); };
  size_t expected = steps_in_window * 6 + 64;
  for (const OpEvent& e : run.timeline) expected += inside(e.start_ns, e.end_ns);
  size_t module_edges = 0;
  for (const ModuleEvent& e : run.module_events) module_edges += inside(e.t_ns, e.t_ns);
  expected += module_edges / 2 + 1;
  for (const PyFrameEvent& f : run.py_frames) expected += inside(f.start_ns, f.end_ns);
  for (const PySample& x : run.samples) expected += inside(x.t_ns, x.t_ns);
  if (activities != nullptr)  // what add_gpu keeps: runtime calls and device work, not Kineto's operators
    for (const Activity& e : activities->events)
      expected += (e.cat == ActivityKind::kRuntime || is_gpu_work(e.cat)) && inside(e.ts_ns, e.ts_ns + e.dur_ns);
  slices.reserve(std::min(expected, options.max_events + 1024));
  // Their args too, one string: ~45 bytes a slice on the bundled examples
  // (tiny_ops, cnn); grown by doubling instead, the last copy left the
  // string's half-size predecessor as a hole at the run's peak.
  constexpr size_t kArgsBytesPerSlice = 48;
  args.reserve(slices.capacity() * kArgsBytesPerSlice);
}

bool TraceBuilder::in_window(Slice& s) {
  if (s.end < s.start) s.end = s.start;
  if (overlaps_window(s.start, s.end)) return true;
  ++outside_window[static_cast<int>(s.cat)];
  return false;
}

void TraceBuilder::add(Slice s, std::string_view a) {
  if (!in_window(s)) return;
  s.rank = rank(s.cat);
  s.args_at = args.size();
  s.args_size = static_cast<uint32_t>(a.size());
  args.append(a);
  slices.push_back(s);
}

std::string_view TraceBuilder::name_for(std::string_view name) {
  if (name.size() <= options.max_name_chars) return name;
  return own(cut_name(name, options.max_name_chars));
}

std::string_view TraceBuilder::own(std::string name) {
  owned.push_back(std::move(name));
  return owned.back();
}

std::string& TraceBuilder::scratch() {
  scratch_.clear();
  return scratch_;
}

void TraceBuilder::add_steps(size_t steps_in_window) {
  const StepAnalysis& sa = analysis.steps;
  if (sa.steps.empty()) return;
  track_names[{main_pid, kStepsTid}] = {"Steps (" + sa.source + ")", 0};
  for (size_t i = 0; i < sa.steps.size() && i < steps_in_window; ++i) {
    const Step& st = sa.steps[i];
    Slice s;
    std::string& a = scratch();
    s.pid = main_pid;
    s.tid = kStepsTid;
    s.start = st.start_ns;
    s.end = st.end_ns;
    s.cat = SliceCat::kStep;
    s.name = own("step " + std::to_string(i) + (st.steady ? (st.slow == SlowKind::kNone ? "" : std::string(" (slow: ") + slow_kind_name(st.slow) + ")")
                                             : std::string(" (warm-up)")));
    add_arg(a, "step", static_cast<int64_t>(i));
    add_arg_ms(a, "ms", st.duration());
    add_arg(a, "steady", st.steady ? "yes" : "no: warm-up, left out of the statistics");
    for (int p = 0; p < kNumPhases; ++p)
      add_arg_ms(a, std::string(phase_name(static_cast<Phase>(p))) + "_ms", st.breakdown.ns[p]);
    add_arg(a, "operators", static_cast<int64_t>(st.ops));
    add(std::move(s), a);
  }
  for (const PhaseSegment& seg : phase_segments(run, sa, steps_in_window)) {
    Slice s;
    std::string& a = scratch();
    s.pid = main_pid;
    s.tid = kStepsTid;
    s.start = seg.start_ns;
    s.end = seg.end_ns;
    s.cat = SliceCat::kPhase;
    s.depth = 1;
    s.name = phase_label(seg.phase);
    add_arg(a, "step", static_cast<int64_t>(seg.step));
    add(std::move(s), a);
  }
}

void TraceBuilder::add_timeline() {
  // Operators carry their most frequent input shapes (sampled: per name, not
  // per call, so the arg says so).
  std::unordered_map<std::string_view, std::string_view> shapes;
  for (const OpStats& op : run.ops)
    if (op.kind == OpKind::kOperator && !op.shapes.empty()) shapes.emplace(op.name, op.shapes.front().shapes);
  for (size_t i = 0; i < run.timeline.size(); ++i) {
    const OpEvent& e = run.timeline[i];
    Slice s;
    std::string& a = scratch();
    s.pid = pid_of(e.thread_index);
    s.tid = tid_of(e.thread_index);
    s.start = e.start_ns;
    s.end = e.end_ns;
    s.cat = cat_of(e.kind);
    s.depth = e.depth;
    s.ref_kind = Ref::kTimeline;
    s.ref = i;
    const std::string_view name = e.name_id < run.strings.size() ? std::string_view(run.strings[e.name_id]) : "?";
    s.name = name_for(name);
    if (e.seq_nr >= 0) add_arg(a, "seq_nr", e.seq_nr);
    if (e.kind == OpKind::kOperator) {
      auto it = shapes.find(name);
      if (it != shapes.end()) add_arg(a, "shapes_most_frequent", it->second);
    }
    add(std::move(s), a);
  }
}

void TraceBuilder::add_modules() {
  std::unordered_map<uint32_t, std::vector<std::pair<uint32_t, int64_t>>> open;  // thread -> (module, enter)
  for (const ModuleEvent& e : run.module_events) {
    auto& stack = open[e.thread_index];
    if (!e.is_exit) {
      stack.emplace_back(e.module, e.t_ns);
      continue;
    }
    auto it = std::find_if(stack.rbegin(), stack.rend(), [&](const auto& m) { return m.first == e.module; });
    if (it == stack.rend()) continue;
    const size_t pos = static_cast<size_t>(stack.rend() - it) - 1;
    Slice s;
    std::string& a = scratch();
    s.pid = pid_of(e.thread_index);
    s.tid = tid_of(e.thread_index);
    s.start = stack[pos].second;
    s.end = e.t_ns;
    s.cat = SliceCat::kModule;
    s.depth = static_cast<uint32_t>(pos);
    if (e.module < run.modules.size()) {
      const ModuleInfo& m = run.modules[e.module];
      s.name = m.name.empty() || m.name == m.type ? name_for(m.type)
                                                  : own(cut_name(m.name + " (" + m.type + ")", options.max_name_chars));
      add_arg(a, "type", m.type);
      add_arg(a, "params", m.params);
    } else {
      s.name = own("module #" + std::to_string(e.module));
    }
    stack.resize(pos);  // also closes scopes whose forward raised
    add(std::move(s), a);
  }
}

void TraceBuilder::add_python_frames() {
  for (const PyFrameEvent& f : run.py_frames) {
    Slice s;
    std::string& a = scratch();
    s.pid = pid_of(f.thread_index);
    s.tid = kPythonTidBase + f.thread_index;
    if (!track_names.count({s.pid, s.tid}))
      track_names[{s.pid, s.tid}] = {thread_label(run, f.thread_index) + " Python (traced calls)",
                                     python_sort_index(f.thread_index)};
    s.start = f.start_ns;
    s.end = f.end_ns;
    s.cat = SliceCat::kPython;
    s.depth = f.depth;
    if (f.function < run.python.size()) {
      const PyFunctionStats& fn = run.python[f.function];
      s.name = name_for(fn.function);
      add_arg(a, "file", fn.file);
      add_arg(a, "line", static_cast<int64_t>(fn.line));
    } else {
      s.name = "?";
    }
    add(std::move(s), a);
  }
}

// Samples become a flame chart over time: each sample stands for the time
// until the next one (at most twice the thread's usual interval), and a
// frame that consecutive samples share is one slice across them. Instant
// events per sample would show only ticks, with the stack hidden in their
// args; slices show the stacks at a glance and nest by construction. A
// slice's length is the sampled time, not the exact call's (samples merge
// two calls of one function in a row); args.samples counts its samples.
void TraceBuilder::add_samples() {
  std::unordered_map<uint32_t, std::vector<const PySample*>> by_thread;
  for (const PySample& s : run.samples) by_thread[s.thread_index].push_back(&s);
  for (auto& [thread, samples] : by_thread) {
    std::stable_sort(samples.begin(), samples.end(), [](const PySample* a, const PySample* b) { return a->t_ns < b->t_ns; });
    std::vector<int64_t> gaps;
    for (size_t i = 1; i < samples.size(); ++i) gaps.push_back(samples[i]->t_ns - samples[i - 1]->t_ns);
    int64_t usual = 5000000;  // 200 Hz
    if (middle_value(gaps) > 0) usual = middle_value(std::move(gaps));
    const int64_t pid = pid_of(thread);
    const int64_t tid = kPythonTidBase + thread;
    track_names.emplace(std::make_pair(pid, tid),
                        std::make_pair(thread_label(run, thread) + " Python (sampled)", python_sort_index(thread)));
    struct Open {
      uint32_t function;
      int64_t start;
      int64_t samples;
    };
    std::vector<Open> open;
    int64_t prev_end = std::numeric_limits<int64_t>::min();
    auto close_to = [&](size_t keep, int64_t t) {
      while (open.size() > keep) {
        const Open o = open.back();
        open.pop_back();
        Slice s;
        std::string& a = scratch();
        s.pid = pid;
        s.tid = tid;
        s.start = o.start;
        s.end = t;
        s.cat = SliceCat::kSample;
        s.depth = static_cast<uint32_t>(open.size());
        if (o.function < run.python.size()) {
          const PyFunctionStats& fn = run.python[o.function];
          s.name = name_for(fn.function);
          add_arg(a, "file", fn.file);
          add_arg(a, "line", static_cast<int64_t>(fn.line));
        } else {
          s.name = "?";
        }
        add_arg(a, "samples", o.samples);
        add(std::move(s), a);
      }
    };
    static const std::vector<uint32_t> kEmpty;
    for (size_t i = 0; i < samples.size(); ++i) {
      const PySample& smp = *samples[i];
      const int64_t t = smp.t_ns;
      const int64_t next_gap = i + 1 < samples.size() ? samples[i + 1]->t_ns - t : usual;
      const int64_t end = t + std::min(next_gap, 2 * usual);
      if (t > prev_end) close_to(0, prev_end);  // a gap: nothing spans it
      const std::vector<uint32_t>& frames =
          smp.stack < run.stacks.size() ? run.stacks[smp.stack].frames : kEmpty;
      size_t k = 0;
      while (k < open.size() && k < frames.size() && open[k].function == frames[k]) ++k;
      close_to(k, t);
      for (size_t f = k; f < frames.size(); ++f) open.push_back(Open{frames[f], t, 0});
      for (Open& o : open) ++o.samples;
      prev_end = end;
    }
    close_to(0, prev_end);
  }
}

void TraceBuilder::add_gpu(const Activities& trace) {
  gpu = true;
  std::set<std::pair<int64_t, int64_t>> cpu_tracks;
  for (size_t t = 0; t < thread_pid.size(); ++t) cpu_tracks.insert({thread_pid[t], thread_tid[t]});
  // Events come in time order, tracks in runs: the last track named is
  // checked before the maps.
  std::pair<int64_t, int64_t> named{INT64_MIN, INT64_MIN};
  auto three = [](const int32_t* v) {
    char buf[48];
    char* p = buf;
    *p++ = '[';
    for (int k = 0; k < 3; ++k) {
      if (k > 0) {
        *p++ = ',';
        *p++ = ' ';
      }
      p = std::to_chars(p, buf + sizeof buf, v[k]).ptr;
    }
    *p++ = ']';
    return std::string(buf, p);
  };
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const Activity& e = trace.events[i];
    Slice s;
    if (e.cat == ActivityKind::kRuntime) {
      s.cat = SliceCat::kRuntime;
      s.pid = e.pid;
      s.tid = e.tid;
    } else if (is_gpu_work(e.cat)) {
      s.cat = e.cat == ActivityKind::kKernel ? SliceCat::kKernel
              : e.cat == ActivityKind::kMemcpy ? SliceCat::kMemcpy : SliceCat::kMemset;
      s.pid = kGpuPidBase + (e.device >= 0 ? e.device : e.pid);
      s.tid = e.stream >= 0 ? e.stream : e.tid;
    } else {
      continue;
    }
    s.start = e.ts_ns;
    s.end = e.end_ns();
    if (!in_window(s)) continue;
    s.ref_kind = Ref::kKineto;
    s.ref = i;
    s.name = name_for(trace.name_of(e));
    std::string& a = scratch();
    if (std::make_pair(s.pid, s.tid) != named) {
      named = {s.pid, s.tid};
      if (s.cat == SliceCat::kRuntime) {
        if (!cpu_tracks.count({e.pid, e.tid}) && !track_names.count({e.pid, e.tid})) {
          auto n = trace.thread_names.find({e.pid, e.tid});
          track_names.emplace(std::make_pair(e.pid, e.tid),
                              std::make_pair(n != trace.thread_names.end() ? n->second : "thread " + std::to_string(e.tid), 500));
        }
      } else {
        const int64_t device = s.pid - kGpuPidBase;
        if (!process_names.count(s.pid)) {
          std::string dev_name;
          for (const DeviceInfo& d : trace.devices)
            if (d.id == device) dev_name = d.name;
          process_names[s.pid] = {"GPU " + std::to_string(device) + (dev_name.empty() ? "" : ": " + dev_name), 100 + device};
        }
        if (!track_names.count({s.pid, s.tid})) track_names[{s.pid, s.tid}] = {"stream " + std::to_string(s.tid), s.tid};
      }
    }
    if (e.cat == ActivityKind::kKernel) {
      add_arg(a, "grid", three(e.grid));
      add_arg(a, "block", three(e.block));
      if (e.registers_per_thread >= 0) add_arg(a, "registers per thread", static_cast<int64_t>(e.registers_per_thread));
      if (e.shared_memory >= 0) add_arg(a, "shared memory", e.shared_memory);
      if (e.est_occupancy >= 0) {
        char buf[64];
        const auto r = std::to_chars(buf, buf + sizeof buf, e.est_occupancy, std::chars_format::fixed, 1);
        add_arg(a, "est. achieved occupancy %", std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
      }
    } else if (s.cat != SliceCat::kRuntime && e.bytes >= 0) {
      add_arg(a, "bytes", e.bytes);
    }
    if (e.correlation >= 0) add_arg(a, "correlation", e.correlation);
    add(std::move(s), a);
  }
}

void TraceBuilder::apply_cap() {
  if (slices.size() > options.max_events) {
    std::vector<size_t> order(slices.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const Slice &x = slices[a], &y = slices[b];
      if (priority(x.cat) != priority(y.cat)) return priority(x.cat) < priority(y.cat);
      if (x.depth != y.depth) return x.depth < y.depth;
      return x.start < y.start;
    });
    std::vector<Slice> kept;
    kept.reserve(options.max_events);
    for (size_t k = 0; k < order.size(); ++k) {
      if (k < options.max_events) kept.push_back(std::move(slices[order[k]]));
      else ++over_cap[static_cast<int>(slices[order[k]].cat)];
    }
    slices = std::move(kept);
  }
  base = 0;
  if (!slices.empty()) {
    base = slices.front().start;
    for (const Slice& s : slices) base = std::min(base, s.start);
  }
}

void TraceBuilder::add_flows() {
  // The slice of each timeline event (SIZE_MAX: none kept).
  std::vector<size_t> of_timeline(run.timeline.size(), SIZE_MAX);
  for (size_t i = 0; i < slices.size(); ++i)
    if (slices[i].ref_kind == Ref::kTimeline && slices[i].ref < of_timeline.size()) of_timeline[slices[i].ref] = i;
  uint64_t id = 1;
  auto link = [&](size_t from, size_t to, const char* cat) {
    if (slices[from].free_point < 0 || slices[to].free_point < 0) {
      ++unbound_flows;
      return;
    }
    flows.push_back(Flow{id++, from, to, cat});
  };
  // Forward → backward: a backward node's (forward thread, sequence number)
  // names the latest-starting forward op with that key (analyze/layers.cc).
  // A Kineto trace's forward ops carry no logical thread id: the sequence
  // number alone (one forward thread) serves there.
  const bool by_seq_only = activities != nullptr;
  std::map<std::pair<uint64_t, int64_t>, size_t> creator;
  for (size_t i = 0; i < run.timeline.size(); ++i) {
    const OpEvent& e = run.timeline[i];
    if (e.kind != OpKind::kOperator || e.seq_nr < 0) continue;
    const auto key = std::make_pair(by_seq_only ? 0 : e.forward_tid, e.seq_nr);
    auto [it, inserted] = creator.emplace(key, i);
    if (!inserted && e.start_ns >= run.timeline[it->second].start_ns) it->second = i;
  }
  for (size_t i = 0; i < slices.size(); ++i) {
    if (slices[i].cat != SliceCat::kBackward || slices[i].ref_kind != Ref::kTimeline) continue;
    const OpEvent& e = run.timeline[slices[i].ref];
    if (e.seq_nr < 0) continue;
    auto c = creator.find({by_seq_only ? 0 : e.forward_tid, e.seq_nr});
    if (c == creator.end()) continue;
    if (of_timeline[c->second] != SIZE_MAX) link(of_timeline[c->second], i, "fwdbwd");
  }
  // CPU → GPU: a runtime call and the device work it launched share a
  // correlation id.
  if (activities != nullptr) {
    const auto& events = activities->events;
    std::unordered_map<int64_t, size_t> launch;
    for (size_t i = 0; i < slices.size(); ++i)
      if (slices[i].cat == SliceCat::kRuntime && events[slices[i].ref].correlation >= 0)
        launch.emplace(events[slices[i].ref].correlation, i);
    for (size_t i = 0; i < slices.size(); ++i) {
      const SliceCat c = slices[i].cat;
      if (c != SliceCat::kKernel && c != SliceCat::kMemcpy && c != SliceCat::kMemset) continue;
      auto it = launch.find(events[slices[i].ref].correlation);
      if (it != launch.end()) link(it->second, i, "ac2g");
    }
  }
}

std::vector<std::string> TraceBuilder::metadata_events() const {
  std::map<int64_t, std::pair<std::string, int64_t>> procs = process_names;
  std::string main_name = activities != nullptr ? "trace " + run.run.script : "python " + run.run.script;
  if (activities != nullptr) {
    auto it = activities->process_names.find(main_pid);
    if (it != activities->process_names.end() && !it->second.empty()) main_name = it->second + " (" + run.run.script + ")";
  }
  procs[main_pid] = {main_name + " (main)", 0};
  for (const ProcessInfo& p : run.processes) {
    if (p.role != ProcessRole::kDataLoaderWorker) continue;
    procs.emplace(p.pid, std::make_pair("DataLoader worker " + std::to_string(p.worker_id) + " (pid " + std::to_string(p.pid) +
                                            (p.start_method.empty() ? "" : ", " + p.start_method) + ")",
                                        10 + p.worker_id));
  }
  std::map<std::pair<int64_t, int64_t>, std::pair<std::string, int64_t>> tracks = track_names;
  for (uint32_t t = 0; t < thread_pid.size(); ++t)
    tracks.emplace(std::make_pair(thread_pid[t], thread_tid[t]),
                   std::make_pair(thread_label(run, t), t == run.main_thread ? 1 : 10 + 2 * static_cast<int64_t>(t)));
  std::set<std::pair<int64_t, int64_t>> used;
  for (const Slice& s : slices) used.insert({s.pid, s.tid});
  std::vector<std::string> out;
  auto meta = [&](const char* what, int64_t pid, int64_t tid, const char* key, const std::string* text, int64_t num) {
    std::string m;
    appendf(m, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%lld,\"tid\":%lld,\"args\":{\"%s\":", what,
            static_cast<long long>(pid + options.pid_offset), static_cast<long long>(tid), key);
    if (text != nullptr) append_str(m, *text);
    else appendf(m, "%lld", static_cast<long long>(num));
    m += "}}";
    out.push_back(std::move(m));
  };
  std::set<int64_t> pids;
  for (const auto& track : used) pids.insert(track.first);
  for (const auto& [pid, _] : procs) pids.insert(pid);
  for (int64_t pid : pids) {
    auto it = procs.find(pid);
    std::string name = it != procs.end() ? it->second.first : "process " + std::to_string(pid);
    if (!options.label.empty()) name = options.label + ": " + name;  // one rank of several
    meta("process_name", pid, 0, "name", &name, 0);
    meta("process_sort_index", pid, 0, "sort_index", nullptr,
         options.sort_offset + (it != procs.end() ? it->second.second : 50));
  }
  for (const auto& track : used) {
    auto it = tracks.find(track);
    const std::string name = it != tracks.end() ? it->second.first : "thread " + std::to_string(track.second);
    meta("thread_name", track.first, track.second, "name", &name, 0);
    meta("thread_sort_index", track.first, track.second, "sort_index", nullptr, it != tracks.end() ? it->second.second : 1000);
  }
  // The window-end marker sits on the Steps track, which has slices whenever it is written.
  return out;
}

std::string TraceBuilder::other_data(size_t steps_in_window, bool limited, size_t steps_in_run) const {
  JsonWriter w;
  w.begin_object();
  w.field("tool", "torchneck");
  w.field("format", "torchneck.trace/1");
  w.field("script", run.run.script);
  w.field("python_mode", to_string(run.run.python_mode));
  w.field("ts_base_ns", base);
  w.field("time", "ts and dur are microseconds since ts_base_ns on the run's monotonic clock (trace time for analyze)");
  w.key("window").begin_object();
  w.field("steps_option", options.steps);
  w.field("steps_in_window", static_cast<uint64_t>(steps_in_window));
  w.field("steps_in_run", static_cast<uint64_t>(steps_in_run));
  w.field("limited", limited);
  w.field("max_events", static_cast<uint64_t>(options.max_events));
  w.end_object();
  uint64_t written[kNumSliceCats] = {};
  for (const Slice& s : slices) ++written[static_cast<int>(s.cat)];
  auto per_cat = [&](const char* key, const uint64_t* counts) {
    w.key(key).begin_object();
    for (int c = 0; c < kNumSliceCats; ++c)
      if (counts[c] > 0) w.field(slice_cat_name(static_cast<SliceCat>(c)), counts[c]);
    w.end_object();
  };
  per_cat("slices", written);
  w.field("flows", static_cast<uint64_t>(flows.size()));
  w.key("left_out").begin_object();
  per_cat("outside_step_window", outside_window);
  per_cat("over_max_events", over_cap);
  w.key("not_recorded_by_the_collectors").begin_object();
  w.field("operators", run.dropped_events);
  w.field("module_events", run.dropped_module_events);
  w.field("python_frames", run.dropped_py_frames);
  w.field("python_samples", run.dropped_samples);
  w.end_object();
  w.field("flows_without_a_free_instant", unbound_flows);
  w.field("slices_clamped_to_their_parent", static_cast<uint64_t>(clamped));
  w.field("names_cut_at_chars", static_cast<uint64_t>(options.max_name_chars));
  w.end_object();
  std::string note;
  if (limited)
    appendf(note, "Only the first %zu of %zu steps are shown (--trace-steps=%lld); profile.json covers the whole run. ",
            steps_in_window, steps_in_run, static_cast<long long>(options.steps));
  if (run.dropped_events > 0)
    appendf(note, "%llu operator events were beyond the collectors' timeline window (--timeline-events/--timeline-steps). ",
            static_cast<unsigned long long>(run.dropped_events));
  w.field("note", note);
  w.end_object();
  return w.str();
}

}  // namespace torchneck::trace_detail
