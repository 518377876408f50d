// Deterministic tracer with cProfile's semantics (CPython Modules/_lsprof.c):
// per function, ncalls / primitive calls / inline (self) time / total time,
// where total time counts only the outermost of recursive activations; and
// the same per caller→callee edge, for pstats' callers dictionaries.
//
// Concurrency: a profile hook always runs with the GIL held (CPython ≤ 3.13
// default builds), so the global function table needs no lock; each thread
// keeps its own call stack and counters, so threads never mix stacks.
// Hot path: a thread_local read, one FlatMap64 probe, one clock read, and
// stores into preallocated vectors; allocation only on a function's first
// sight (per thread) and when the stack outgrows its reservation.
//
// Timeline (trace.json): each completed call is also appended to the
// thread's EventBuffer of PyFrameEvent (one mmap'd chunk per 16384 calls,
// capped at timeline_events_per_thread), while the step window
// (core/timeline_window.h) is open, as for the operator timeline; calls
// past these are counted in Run::dropped_py_frames.
// Imports are one slice each in the timeline: while a thread is inside
// importlib's _find_and_load, only the nested _find_and_load calls are kept
// (the import tree), the calls the import makes are counted in the
// statistics and as dropped frames. With torch 2.6, the first optimizer's
// __init__ imports torch._dynamo lazily (torch/_compile.py): about 1 M
// calls (sympy, inspect, typing, dataclasses), which filled the timeline
// before the first step; operators then had no Python caller in the flame
// graph and trace.json had no frame of the steps.
#include "collect/python/tracer.h"

#include <Python.h>
#include <frameobject.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "collect/python/py_names.h"
#include "core/clock.h"
#include "core/event_buffer.h"
#include "core/flat_map.h"
#include "core/threads.h"
#include "core/timeline_window.h"

namespace torchneck {
namespace {

struct Counters {
  uint64_t calls = 0;
  uint64_t recursive_calls = 0;
  int64_t inline_ns = 0;
  int64_t total_ns = 0;
  int recursion_level = 0;
};

struct Edge {
  uint32_t caller = 0;
  uint32_t callee = 0;
  Counters c;
};

struct Context {
  uint32_t func;
  uint32_t edge;  // kNoEdge at the bottom of the stack
  int64_t t0;
  int64_t sub_ns;  // time spent in callees
};
constexpr uint32_t kNoEdge = 0xffffffffu;

struct ThreadState {
  explicit ThreadState(size_t timeline_capacity) : frames(timeline_capacity) {}
  uint32_t thread_index = 0;
  // Completed calls, function ids global (remapped to Run::python at
  // snapshot). Written by this thread's hook only, read with the GIL held.
  EventBuffer<PyFrameEvent> frames;
  std::vector<Counters> funcs;  // indexed by global function id
  std::vector<Edge> edges;
  FlatMap64 edge_index{256};    // (caller << 32 | callee) + 1 → edge
  std::vector<Context> stack;
  uint32_t imports_open = 0;  // _find_and_load activations on the stack
};

struct Function {
  PyFuncName name;
  PyObject* owner = nullptr;  // code object kept alive: its address is our key
};

struct TracerState {
  bool active = false;
  TracerOptions options;
  FlatMap64 func_index{1024};  // code object or PyMethodDef address → id
  std::vector<Function> functions;
  std::vector<uint8_t> is_import;  // per function id: importlib's _find_and_load
  std::vector<std::unique_ptr<ThreadState>> threads;
  PyObject* thread_hook = nullptr;  // the builtin given to threading.setprofile
};

TracerState* g_state = nullptr;  // accessed with the GIL held only

// The hook's `obj` argument: each thread's hook is installed with its own
// ThreadHandle, so the hook finds its thread's state without a thread_local
// lookup (as _lsprof passes its profiler object).
struct ThreadHandle {
  PyObject_HEAD
  ThreadState* ts;
};
PyTypeObject* g_handle_type = nullptr;  // created once, never freed

// A handle owning a new ThreadState for the thread `os_tid` (first use of
// the hook on a thread, or installation on an existing thread).
PyObject* new_thread_handle(uint32_t thread_index) {
  if (g_handle_type == nullptr) {
    static PyType_Slot slots[] = {{0, nullptr}};
    static PyType_Spec spec = {"torchneck._TracerThread", sizeof(ThreadHandle), 0,
                               Py_TPFLAGS_DEFAULT, slots};
    g_handle_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
    if (g_handle_type == nullptr) return nullptr;
  }
  auto* h = PyObject_New(ThreadHandle, g_handle_type);
  if (h == nullptr) return nullptr;
  auto ts = std::make_unique<ThreadState>(g_state->options.timeline_events_per_thread);
  ts->thread_index = thread_index;
  ts->stack.reserve(256);
  ts->funcs.reserve(g_state->functions.size() + 64);
  h->ts = ts.get();
  g_state->threads.push_back(std::move(ts));  // state outlives the handle
  return reinterpret_cast<PyObject*>(h);
}

uint32_t function_id(const void* key, PyObject* named_by, bool is_code) {
  const auto k = reinterpret_cast<uint64_t>(key);
  uint32_t id = g_state->func_index.find(k);
  if (id != FlatMap64::kMissing) return id;
  Function f;
  if (is_code) {
    f.name = name_of_code(reinterpret_cast<PyCodeObject*>(named_by));
    Py_INCREF(named_by);
    f.owner = named_by;
  } else {
    f.name = name_of_cfunction(named_by);
  }
  id = static_cast<uint32_t>(g_state->functions.size());
  g_state->is_import.push_back(is_code && f.name.function == "_find_and_load" &&
                               f.name.file == "<frozen importlib._bootstrap>");
  g_state->functions.push_back(std::move(f));
  g_state->func_index.insert(k, id);
  return id;
}

inline void enter(ThreadState* ts, uint32_t func) {
  if (func >= ts->funcs.size()) ts->funcs.resize(g_state->functions.size());
  ++ts->funcs[func].recursion_level;
  ts->imports_open += g_state->is_import[func];
  uint32_t edge = kNoEdge;
  if (!ts->stack.empty()) {
    const uint32_t caller = ts->stack.back().func;
    const uint64_t key = ((static_cast<uint64_t>(caller) << 32) | func) + 1;
    edge = ts->edge_index.find(key);
    if (edge == FlatMap64::kMissing) {
      edge = static_cast<uint32_t>(ts->edges.size());
      ts->edges.push_back(Edge{caller, func, {}});
      ts->edge_index.insert(key, edge);
    }
    ++ts->edges[edge].c.recursion_level;
  }
  ts->stack.push_back(Context{func, edge, now_ns(), 0});
}

inline void account(Counters& c, int64_t tt, int64_t it) {
  if (--c.recursion_level == 0) {
    c.total_ns += tt;
  } else {
    ++c.recursive_calls;
  }
  c.inline_ns += it;
  ++c.calls;
}

inline void leave(ThreadState* ts, int64_t now) {
  if (ts->stack.empty()) return;  // a frame entered before tracing began
  const Context ctx = ts->stack.back();
  ts->stack.pop_back();
  const int64_t tt = now - ctx.t0;
  const int64_t it = tt - ctx.sub_ns;
  if (!ts->stack.empty()) ts->stack.back().sub_ns += tt;
  const bool import = g_state->is_import[ctx.func] != 0;
  ts->imports_open -= import;
  if (ts->frames.capacity() > 0) {
    if (timeline_window().open() && (ts->imports_open == 0 || import)) {
      ts->frames.append(PyFrameEvent{ctx.t0, now, ctx.func, ts->thread_index,
                                     static_cast<uint32_t>(ts->stack.size())});
    } else {
      ts->frames.drop();
    }
  }
  account(ts->funcs[ctx.func], tt, it);
  if (ctx.edge != kNoEdge) account(ts->edges[ctx.edge].c, tt, it);
}

int profile_hook(PyObject* obj, PyFrameObject* frame, int what, PyObject* arg) {
  if (g_state == nullptr || !g_state->active) return 0;
  ThreadState* ts = reinterpret_cast<ThreadHandle*>(obj)->ts;
  switch (what) {
    case PyTrace_CALL: {
      PyCodeObject* code = PyFrame_GetCode(frame);
      const uint32_t id = function_id(code, reinterpret_cast<PyObject*>(code), true);
      Py_DECREF(code);
      enter(ts, id);
      break;
    }
    case PyTrace_RETURN:
      leave(ts, now_ns());
      break;
    case PyTrace_C_CALL:
      if (g_state->options.builtins && PyCFunction_Check(arg)) {
        auto* fn = reinterpret_cast<PyCFunctionObject*>(arg);
        enter(ts, function_id(fn->m_ml, arg, false));
      }
      break;
    case PyTrace_C_RETURN:
    case PyTrace_C_EXCEPTION:
      if (g_state->options.builtins && PyCFunction_Check(arg)) leave(ts, now_ns());
      break;
    default:
      break;
  }
  return 0;
}

// threading.setprofile() target: the first event a new thread delivers
// swaps the Python-level hook for our C hook on that thread.
PyObject* thread_bootstrap(PyObject*, PyObject*) {
  if (g_state != nullptr && g_state->active) {
    PyObject* handle = new_thread_handle(current_thread_index());
    if (handle == nullptr) return nullptr;
    PyEval_SetProfile(profile_hook, handle);  // the hook now owns a reference
    Py_DECREF(handle);
  }
  Py_RETURN_NONE;
}
PyMethodDef g_bootstrap_def = {"_torchneck_thread_profile", thread_bootstrap, METH_VARARGS,
                               "Installs torchneck's tracer on a new thread."};

bool call_threading_setprofile(PyObject* hook) {
  PyObject* threading = PyImport_ImportModule("threading");
  if (threading == nullptr) return false;
  PyObject* r = PyObject_CallMethod(threading, "setprofile", "O", hook);
  Py_DECREF(threading);
  if (r == nullptr) return false;
  Py_DECREF(r);
  return true;
}

// Sets the hook of another thread's state (GIL held). 3.11 exports
// _PyEval_SetProfile for exactly this; later versions change the current
// thread state briefly, as PyEval_SetProfileAllThreads does internally.
void set_thread_hook(PyThreadState* t, Py_tracefunc hook, PyObject* obj) {
#if PY_VERSION_HEX >= 0x030C0000
  PyThreadState* saved = PyThreadState_Swap(t);
  PyEval_SetProfile(hook, obj);
  PyThreadState_Swap(saved);
#else
  _PyEval_SetProfile(t, hook, obj);
#endif
}

uint64_t native_id(PyThreadState* t) {
#if PY_VERSION_HEX >= 0x030B0000
  return static_cast<uint64_t>(t->native_thread_id);
#else
  return 0;
#endif
}

void set_hook_all_threads(bool install) {
  PyInterpreterState* interp = PyThreadState_GetInterpreter(PyThreadState_Get());
  for (PyThreadState* t = PyInterpreterState_ThreadHead(interp); t != nullptr;
       t = PyThreadState_Next(t)) {
    if (install) {
      PyObject* handle = new_thread_handle(thread_index_for(native_id(t)));
      if (handle == nullptr) break;
      set_thread_hook(t, profile_hook, handle);
      Py_DECREF(handle);
    } else if (t->c_profilefunc == profile_hook) {
      // Only our own hook: a profiler the script installed since stays.
      set_thread_hook(t, nullptr, nullptr);
    }
  }
  if (PyErr_Occurred()) PyErr_Clear();
}

// cProfile's flush_unmatched: activations still open at stop count as calls
// ending now, so cumulative times of the outer frames are not lost.
void flush_open_frames(int64_t now) {
  for (auto& ts : g_state->threads)
    while (!ts->stack.empty()) leave(ts.get(), now);
}

}  // namespace

bool start_tracer(const TracerOptions& options, std::string* error) {
  if (g_state != nullptr && g_state->active) {
    *error = "the Python tracer is already running";
    return false;
  }
  delete g_state;
  g_state = new TracerState();
  g_state->options = options;
  g_state->thread_hook = PyCFunction_New(&g_bootstrap_def, nullptr);
  if (g_state->thread_hook == nullptr || !call_threading_setprofile(g_state->thread_hook)) {
    PyErr_Clear();
    *error = "threading.setprofile failed; new threads would not be traced";
    return false;
  }
  g_state->active = true;
  set_hook_all_threads(true);
  return true;
}

void stop_tracer() {
  if (g_state == nullptr || !g_state->active) return;
  const int64_t now = now_ns();
  set_hook_all_threads(false);
  call_threading_setprofile(Py_None);
  PyErr_Clear();
  g_state->active = false;
  flush_open_frames(now);
}

void snapshot_tracer(Run& run) {
  if (g_state == nullptr) return;
  const size_t n = g_state->functions.size();
  std::vector<Counters> merged(n);
  for (auto& ts : g_state->threads) {
    for (size_t f = 0; f < ts->funcs.size(); ++f) {
      const Counters& c = ts->funcs[f];
      merged[f].calls += c.calls;
      merged[f].recursive_calls += c.recursive_calls;
      merged[f].inline_ns += c.inline_ns;
      merged[f].total_ns += c.total_ns;
    }
  }
  // Keep only functions that completed at least one call; remember where.
  std::vector<uint32_t> out_index(n, 0xffffffffu);
  for (size_t f = 0; f < n; ++f) {
    if (merged[f].calls == 0) continue;
    const Function& fn = g_state->functions[f];
    PyFunctionStats s;
    s.function = fn.name.function;
    s.file = fn.name.file;
    s.line = fn.name.line;
    s.builtin = fn.name.builtin;
    s.calls = merged[f].calls;
    s.primitive_calls = merged[f].calls - merged[f].recursive_calls;
    s.self_ns = merged[f].inline_ns;
    s.total_ns = merged[f].total_ns;
    out_index[f] = static_cast<uint32_t>(run.python.size());
    run.python.push_back(std::move(s));
  }
  // The timeline: every completed call has calls >= 1, so its function is
  // in run.python.
  const size_t first_frame = run.py_frames.size();
  for (auto& ts : g_state->threads) {
    ts->frames.for_each([&](const PyFrameEvent& f) {
      PyFrameEvent out = f;
      out.function = out_index[f.function];
      if (out.function != 0xffffffffu) run.py_frames.push_back(out);
    });
    run.dropped_py_frames += ts->frames.dropped();
  }
  std::sort(run.py_frames.begin() + static_cast<std::ptrdiff_t>(first_frame), run.py_frames.end(),
            [](const PyFrameEvent& a, const PyFrameEvent& b) {
              if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
              if (a.thread_index != b.thread_index) return a.thread_index < b.thread_index;
              return a.depth < b.depth;
            });
  for (auto& ts : g_state->threads) {
    for (const Edge& e : ts->edges) {
      if (e.c.calls == 0) continue;
      const uint32_t callee = out_index[e.callee];
      const uint32_t caller = out_index[e.caller];
      if (callee == 0xffffffffu || caller == 0xffffffffu) continue;
      auto& callers = run.python[callee].callers;
      CallerEdge* edge = nullptr;
      for (auto& ce : callers)
        if (ce.caller == caller) edge = &ce;
      if (edge == nullptr) {
        callers.push_back(CallerEdge{caller, 0, 0, 0, 0});
        edge = &callers.back();
      }
      edge->calls += e.c.calls;
      edge->primitive_calls += e.c.calls - e.c.recursive_calls;
      edge->self_ns += e.c.inline_ns;
      edge->total_ns += e.c.total_ns;
    }
  }
}

void collect_tracer(Run& run) {
  if (g_state == nullptr) return;
  snapshot_tracer(run);
  for (Function& f : g_state->functions) Py_XDECREF(f.owner);
  Py_XDECREF(g_state->thread_hook);
  delete g_state;
  g_state = nullptr;
}

}  // namespace torchneck
