// The Python sampler (see sampler.h). One native thread wakes at absolute
// deadlines, takes the GIL, and reads every other Python thread's frame stack
// through the public frame API (PyThreadState_GetFrame, PyFrame_GetBack,
// PyFrame_GetCode: right on 3.11's, 3.12's and 3.13's _PyInterpreterFrame
// layouts alike, skipping 3.12+'s shim and incomplete frames as
// sys._getframe does). It runs no Python code and installs no signal
// handler, so the profiled program's behaviour (signals, sys.setprofile,
// threading.settrace) is untouched.
//
// Bias, and how it is avoided: a sample is taken when the sampler gets the
// GIL. Behind a thread that runs Python for longer than the switch interval
// (5 ms) that is a forced switch at an arbitrary bytecode, a fair sample. But
// Python bursts shorter than that, each ending in a call that releases the
// GIL (a torch op, I/O), would all be seen at the releasing call: their time
// would land on the caller of that call. So while (and only while) it waits
// for the GIL, the sampler lowers the switch interval to kGilRequestUs; see
// gil_request.cc for how, on each version.
// (Py_AddPendingCall from this thread cannot help: on 3.11 and 3.12 it does
// not wake the main thread's eval loop until its next GIL switch.)
//
// Synchronisation: every piece of sampler state is written by the sampler
// thread only while it holds the GIL, and read by collect_sampler() with the
// GIL held, so the GIL is the lock. The only cross-thread flag read without
// the GIL is `stop`.
#include "collect/python/sampler.h"

#include <Python.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include "collect/python/gil_request.h"
#include "collect/python/py_names.h"
#include "core/clock.h"
#include "core/event_buffer.h"
#include "core/threads.h"
#include "core/timeline_window.h"

#if PY_VERSION_HEX < 0x030B0000
#error "the sampler needs CPython 3.11 or later (PyThreadState::native_thread_id)"
#endif

namespace torchneck {
namespace {

// Memory bounds for long runs. Per-function statistics are exact whatever
// happens; only folded stacks are bounded.
constexpr size_t kMaxStacks = 200000;          // distinct (thread, stack) keys
constexpr size_t kMaxStackDepth = 256;         // innermost frames kept per stack
constexpr size_t kMaxStoredFrames = 8u << 20;  // all keys together: ~32 MiB

struct FunctionEntry {
  PyCodeObject* code = nullptr;  // strong reference: the address stays unique
  uint64_t self_samples = 0;
  uint64_t total_samples = 0;
  int64_t self_ns = 0;
  int64_t total_ns = 0;
  uint64_t last_stamp = 0;  // observation that last counted total_*: once per stack
};

struct StackKey {
  uint32_t thread_index = 0;
  std::vector<uint32_t> frames;  // function indices, outermost → innermost
  bool operator==(const StackKey& o) const {
    return thread_index == o.thread_index && frames == o.frames;
  }
};

struct StackKeyHash {
  size_t operator()(const StackKey& k) const {
    uint64_t h = 1469598103934665603ULL ^ k.thread_index;  // FNV-1a over indices
    for (uint32_t f : k.frames) h = (h ^ f) * 1099511628211ULL;
    return static_cast<size_t>(h);
  }
};

struct StackValue {
  uint32_t id = 0;  // insertion order: what timeline samples refer to
  uint64_t samples = 0;
  int64_t weight_ns = 0;
};

struct SamplerState {
  std::unordered_map<PyCodeObject*, uint32_t> function_of_code;
  std::vector<FunctionEntry> functions;
  std::unordered_map<StackKey, StackValue, StackKeyHash> stacks;
  std::unordered_map<uint64_t, uint32_t> thread_index_of_tid;  // avoids the registry lock
  uint64_t ticks = 0;         // sampling passes (one per wake-up)
  uint64_t stamp = 0;         // one per (pass, thread) observation
  size_t stored_frames = 0;   // sum of frames over all stack keys
  uint64_t dropped_stack_samples = 0;
  uint64_t truncated_stack_samples = 0;
  StackKey scratch;           // reused: a lookup allocates only for a new stack
  // The timeline window: one record per thread sample, PySample::stack being
  // a StackValue::id until fill_sampler maps it. Chunked, so a sample
  // allocates only once per chunk; bounded by SamplerOptions::timeline_samples.
  EventBuffer<PySample> timeline{size_t{1} << 19};
};

struct Control {
  bool running = false;        // touched only with the GIL held
  std::atomic<bool> stop{false};
  std::thread thread;
  pid_t owner_pid = 0;         // a forked child has no sampler thread
  bool atexit_registered = false;
  bool lowers_interval = true;  // see prepare_gil_request; a note when not
};

// Leaked on purpose: no destructor may run at process exit while a sampler
// thread could still be alive.
SamplerState* g_state = new SamplerState();
Control& control() {
  static auto* c = new Control();
  return *c;
}

uint32_t function_index(SamplerState& s, PyCodeObject* code) {
  auto it = s.function_of_code.find(code);
  if (it != s.function_of_code.end()) return it->second;
  // First sight: keep the code object alive so its address cannot be reused
  // by another code object. Naming waits until collect (once per function).
  Py_INCREF(code);
  const auto index = static_cast<uint32_t>(s.functions.size());
  s.functions.push_back(FunctionEntry{code});
  s.function_of_code.emplace(code, index);
  return index;
}

uint32_t thread_index_of(SamplerState& s, uint64_t tid) {
  auto it = s.thread_index_of_tid.find(tid);
  if (it != s.thread_index_of_tid.end()) return it->second;
  // The Linux tid (native_thread_id) is what the other collectors register
  // with gettid(), so one thread has one index everywhere.
  const uint32_t index = thread_index_for(tid);
  s.thread_index_of_tid.emplace(tid, index);
  return index;
}

// Keeps one thread sample in the timeline window, or counts it as dropped.
void record_sample(SamplerState& s, int64_t t_ns, uint32_t thread_index, uint32_t stack, int64_t weight_ns) {
  if (!timeline_window().open()) {
    s.timeline.drop();
    return;
  }
  PySample x;
  x.t_ns = t_ns;
  x.thread_index = thread_index;
  x.stack = stack;
  x.weight_ns = weight_ns;
  s.timeline.append(x);  // counts a drop when full
}

// Records one thread's stack, read innermost → outermost. GIL held.
void sample_thread(SamplerState& s, PyThreadState* ts, int64_t t_ns, int64_t weight_ns) {
  PyFrameObject* frame = PyThreadState_GetFrame(ts);  // new reference or NULL
  if (frame == nullptr) return;                       // not running Python code
  const uint64_t stamp = ++s.stamp;
  std::vector<uint32_t>& frames = s.scratch.frames;
  frames.clear();
  bool truncated = false;
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    const uint32_t f = function_index(s, code);
    Py_DECREF(code);
    FunctionEntry& e = s.functions[f];
    if (e.last_stamp != stamp) {  // recursion counts once per sample
      e.last_stamp = stamp;
      ++e.total_samples;
      e.total_ns += weight_ns;
    }
    if (frames.size() < kMaxStackDepth) {
      frames.push_back(f);
    } else {
      truncated = true;  // keep the innermost frames, where the time is spent
    }
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference or NULL
    Py_DECREF(frame);
    frame = back;
  }
  if (frames.empty()) return;
  FunctionEntry& leaf = s.functions[frames.front()];
  ++leaf.self_samples;
  leaf.self_ns += weight_ns;
  if (truncated) ++s.truncated_stack_samples;

  std::reverse(frames.begin(), frames.end());
  s.scratch.thread_index = thread_index_of(s, static_cast<uint64_t>(ts->native_thread_id));
  auto it = s.stacks.find(s.scratch);
  if (it == s.stacks.end()) {
    if (s.stacks.size() >= kMaxStacks || s.stored_frames + frames.size() > kMaxStoredFrames) {
      ++s.dropped_stack_samples;
      record_sample(s, t_ns, s.scratch.thread_index, PySample::kNoStack, weight_ns);
      return;
    }
    StackValue v;
    v.id = static_cast<uint32_t>(s.stacks.size());
    it = s.stacks.emplace(s.scratch, v).first;
    s.stored_frames += frames.size();
  }
  ++it->second.samples;
  it->second.weight_ns += weight_ns;
  record_sample(s, t_ns, s.scratch.thread_index, it->second.id, weight_ns);
}

// One sampling pass over every thread of the interpreter. GIL held.
void sample_all(PyInterpreterState* interp, PyThreadState* self, int64_t t_ns, int64_t weight_ns) {
  // On 3.11 a GC-tracked allocation (PyThreadState_GetFrame materialises
  // frame objects) may run a collection right here, and finalizers may run
  // Python code that releases the GIL while we walk other threads' frames.
  // Disabling the collector for the pass rules that out; the allocation count
  // carries over, so the program's next allocation collects as it would have.
  const int gc_was_enabled = PyGC_Disable();
  SamplerState& s = *g_state;
  ++s.ticks;
  for (PyThreadState* ts = PyInterpreterState_ThreadHead(interp); ts != nullptr;
       ts = PyThreadState_Next(ts)) {
    if (ts != self) sample_thread(s, ts, t_ns, weight_ns);
  }
  if (PyErr_Occurred()) PyErr_Clear();  // e.g. MemoryError materialising a frame
  if (gc_was_enabled) PyGC_Enable();
}

void sleep_until(int64_t deadline_ns) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(deadline_ns / 1000000000LL);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1000000000LL);
  // Same clock as now_ns(); EINTR just means an early wake-up.
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

bool must_stop() {
  return control().stop.load(std::memory_order_acquire) || interpreter_finalizing();
}

void sampler_main(PyInterpreterState* interp, int64_t period_ns, int64_t started_ns) {
  // Our thread state is created once and kept: the nested Ensure/Release
  // pairs below then only move the GIL, without creating and deleting a
  // thread state every sample.
  PyGILState_STATE outer = PyGILState_Ensure();
  PyThreadState* self = PyThreadState_Get();
  PyThreadState* saved = PyEval_SaveThread();

  int64_t last_ns = started_ns;
  int64_t deadline = started_ns + period_ns;  // absolute: no drift
  for (;;) {
    sleep_until(deadline);
    if (must_stop()) break;
    // Ask for the GIL after 100 us (gil_request.cc), not the switch interval (5 ms):
    // the busy thread is then stopped at an arbitrary bytecode, instead of at
    // its next GIL-releasing call (a torch op), which is where every sample
    // of a Python burst shorter than 5 ms would otherwise land. Restored as
    // soon as we hold the GIL, so other threads' switching is unchanged.
    const GilRequest request = begin_gil_request();
    PyGILState_STATE gil = PyGILState_Ensure();
    end_gil_request(request);
    // While we hold the GIL the interpreter cannot start finalising, and a
    // stop requested while we waited for the GIL is honoured here.
    if (must_stop()) {
      PyGILState_Release(gil);
      break;
    }
    // Weight by the time actually elapsed: waiting for the GIL (up to the
    // switch interval behind a busy thread) then biases nothing.
    const int64_t now = now_ns();
    sample_all(interp, self, now, now - last_ns);
    last_ns = now;
    PyGILState_Release(gil);
    // Behind schedule (GIL wait): sample again as soon as possible, but never
    // in a burst of catch-up samples.
    deadline = std::max(deadline + period_ns, now_ns());
  }
  // Deleting our thread state needs the GIL; after finalisation began, taking
  // it would end this thread inside CPython, so the state is left behind.
  if (!interpreter_finalizing()) {
    PyEval_RestoreThread(saved);
    PyGILState_Release(outer);
  }
}

// atexit callbacks run before the interpreter is marked as finalising, so
// stopping here means the sampler never races interpreter shutdown even when
// the caller never calls stop_sampler().
PyObject* stop_at_exit(PyObject*, PyObject*) {
  stop_sampler();
  Py_RETURN_NONE;
}
PyMethodDef kStopAtExit = {"_torchneck_stop_sampler", stop_at_exit, METH_NOARGS, nullptr};

bool register_atexit(std::string* error) {
  Control& c = control();
  if (c.atexit_registered) return true;
  PyObject* fn = PyCFunction_New(&kStopAtExit, nullptr);
  PyObject* atexit = fn ? PyImport_ImportModule("atexit") : nullptr;
  PyObject* r = atexit ? PyObject_CallMethod(atexit, "register", "O", fn) : nullptr;
  Py_XDECREF(r);
  Py_XDECREF(atexit);
  Py_XDECREF(fn);
  if (r == nullptr) {
    PyErr_Clear();
    if (error) *error = "python sampler: could not register its atexit hook";
    return false;
  }
  c.atexit_registered = true;
  return true;
}

// Python thread names, read once at collect time (threading._active; the
// `name` property may run Python code, which is fine here, never while
// sampling). Threads that ended before collect are not in _active.
void name_sampled_threads(const SamplerState& s) {
  if (s.thread_index_of_tid.empty()) return;
  PyObject* modname = PyUnicode_FromString("threading");
  PyObject* threading = modname ? PyImport_GetModule(modname) : nullptr;  // no import
  Py_XDECREF(modname);
  PyObject* active = threading ? PyObject_GetAttrString(threading, "_active") : nullptr;
  PyObject* list = active && PyDict_Check(active) ? PyDict_Values(active) : nullptr;
  const Py_ssize_t n = list ? PyList_GET_SIZE(list) : 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* t = PyList_GET_ITEM(list, i);  // borrowed from our copy
    PyObject* native = PyObject_GetAttrString(t, "native_id");
    PyObject* name = PyObject_GetAttrString(t, "name");
    if (native && name && PyLong_Check(native)) {
      const auto tid = static_cast<uint64_t>(PyLong_AsUnsignedLongLong(native));
      auto it = s.thread_index_of_tid.find(tid);
      if (it != s.thread_index_of_tid.end()) set_thread_name(it->second, utf8_of(name));
    }
    Py_XDECREF(native);
    Py_XDECREF(name);
    PyErr_Clear();
  }
  Py_XDECREF(list);
  Py_XDECREF(active);
  Py_XDECREF(threading);
  PyErr_Clear();
}

}  // namespace

bool start_sampler(const SamplerOptions& options, std::string* error) {
  Control& c = control();
  if (c.running) {
    if (error) *error = "python sampler: already running";
    return false;
  }
#ifdef Py_GIL_DISABLED
  // Free-threaded builds: holding "the GIL" no longer stops the threads whose
  // frames we would read.
  if (error) *error = "python sampler: not supported on free-threaded Python";
  return false;
#endif
  if (!(options.hz > 0 && options.hz <= 10000)) {
    if (error) *error = "python sampler: rate must be in (0, 10000] Hz";
    return false;
  }
  if (!register_atexit(error)) return false;
  c.lowers_interval = prepare_gil_request(PyInterpreterState_Get());
  // The sampler thread is not running: no one else touches the state.
  g_state->timeline = EventBuffer<PySample>(options.timeline_samples);
  c.owner_pid = getpid();
  c.stop.store(false, std::memory_order_release);
  const auto period_ns = static_cast<int64_t>(std::llround(1e9 / options.hz));
  try {
    // The new thread blocks in PyGILState_Ensure until our caller lets go of
    // the GIL; nothing is sampled before that.
    c.thread = std::thread(sampler_main, PyInterpreterState_Get(), period_ns, now_ns());
  } catch (const std::system_error& e) {
    if (error) *error = std::string("python sampler: cannot start thread: ") + e.what();
    return false;
  }
  c.running = true;
  return true;
}

void stop_sampler() {
  Control& c = control();
  if (!c.running) return;
  c.running = false;
  if (getpid() != c.owner_pid) {
    // A forked child: the sampler thread exists only in the parent. Its
    // handle can be neither joined nor detached here, so it is leaked.
    (void)new std::thread(std::move(c.thread));
    return;
  }
  c.stop.store(true, std::memory_order_release);
  // The sampler may be waiting for the GIL: let it go while we wait.
  Py_BEGIN_ALLOW_THREADS
  c.thread.join();
  Py_END_ALLOW_THREADS
}

namespace {
// Copies the samples so far into run; changes nothing. GIL held: the sampler
// thread only touches the state while it holds the GIL.
void fill_sampler(Run& run) {
  SamplerState& s = *g_state;
  const auto offset = static_cast<uint32_t>(run.python.size());
  run.python.reserve(run.python.size() + s.functions.size());
  for (const FunctionEntry& e : s.functions) {
    const PyFuncName n = name_of_code(e.code);
    PyFunctionStats st;
    st.function = n.function;
    st.file = n.file;
    st.line = n.line;
    st.builtin = false;
    st.calls = 0;  // a sampler cannot count calls
    st.self_samples = e.self_samples;
    st.total_samples = e.total_samples;
    st.self_ns = e.self_ns;
    st.total_ns = e.total_ns;
    run.python.push_back(std::move(st));
  }

  const size_t first_stack = run.stacks.size();
  std::vector<std::pair<SampledStack, uint32_t>> sorted;  // with StackValue::id
  sorted.reserve(s.stacks.size());
  for (const auto& [key, value] : s.stacks) {
    SampledStack st;
    st.thread_index = key.thread_index;
    st.frames.reserve(key.frames.size());
    for (uint32_t f : key.frames) st.frames.push_back(f + offset);
    st.samples = value.samples;
    st.weight_ns = value.weight_ns;
    sorted.emplace_back(std::move(st), value.id);
  }
  // Heaviest first, so reports and tests see a stable order.
  std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) {
    const SampledStack& a = x.first;
    const SampledStack& b = y.first;
    if (a.weight_ns != b.weight_ns) return a.weight_ns > b.weight_ns;
    if (a.thread_index != b.thread_index) return a.thread_index < b.thread_index;
    return a.frames < b.frames;
  });
  // The timeline refers to stacks by id: remap to their sorted positions.
  std::vector<uint32_t> position_of_id(sorted.size(), PySample::kNoStack);
  run.stacks.reserve(first_stack + sorted.size());
  for (auto& [st, id] : sorted) {
    position_of_id[id] = static_cast<uint32_t>(run.stacks.size());
    run.stacks.push_back(std::move(st));
  }
  run.samples.reserve(run.samples.size() + s.timeline.size());
  s.timeline.for_each([&](const PySample& x) {
    PySample y = x;
    if (y.stack != PySample::kNoStack) y.stack = y.stack < position_of_id.size() ? position_of_id[y.stack] : PySample::kNoStack;
    run.samples.push_back(y);
  });
  run.dropped_samples += s.timeline.dropped();
  run.python_samples += s.ticks;

  if (s.dropped_stack_samples > 0) {
    run.notes.push_back("python sampler: " + std::to_string(s.dropped_stack_samples) +
                        " thread samples not kept as folded stacks (limit of " +
                        std::to_string(kMaxStacks) + " distinct stacks or " +
                        std::to_string(kMaxStoredFrames) +
                        " frames reached); per-function times include them");
  }
  if (s.truncated_stack_samples > 0) {
    run.notes.push_back("python sampler: " + std::to_string(s.truncated_stack_samples) +
                        " stacks deeper than " + std::to_string(kMaxStackDepth) +
                        " frames were cut to their innermost frames in folded stacks");
  }
  if (!control().lowers_interval) {
    run.notes.push_back(
        "python sampler: could not find this Python's GIL switch interval to shorten it while "
        "sampling; Python bursts shorter than the interval that end in a GIL-releasing call are "
        "charged to that call's caller");
  }
  name_sampled_threads(s);
}
}  // namespace

void snapshot_sampler(Run& run) {
  if (g_state != nullptr) fill_sampler(run);
}

void collect_sampler(Run& run) {
  stop_sampler();  // no-op when stopped; the state must not change under us
  fill_sampler(run);
  SamplerState& s = *g_state;
  // Release the code objects and start the next session clean.
  for (const FunctionEntry& e : s.functions) Py_DECREF(e.code);
  delete g_state;
  g_state = new SamplerState();
}

}  // namespace torchneck
