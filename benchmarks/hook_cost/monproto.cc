// Prototype for measuring event delivery: the same bookkeeping as
// src/collect/python/tracer.cc (function id by FlatMap64 probe, caller edge
// probe, clock read at enter and leave, counters), fed either by the legacy
// profile hook (PyEval_SetProfile, what the tracer uses) or by sys.monitoring
// callbacks (PEP 669: PY_START/PY_RESUME/PY_THROW, PY_RETURN/PY_YIELD/PY_UNWIND,
// CALL, C_RETURN/C_RAISE) registered as METH_FASTCALL C functions.
// Single thread only (a prototype for the benchmark).
#include <Python.h>
#include <frameobject.h>

#include <vector>

#include "core/clock.h"
#include "core/flat_map.h"

namespace {
using torchneck::FlatMap64;
using torchneck::now_ns;

struct Counters {
  uint64_t calls = 0, recursive = 0;
  int64_t inline_ns = 0, total_ns = 0;
  int level = 0;
};
struct Ctx {
  uint32_t func, edge;
  int64_t t0, sub;
};
constexpr uint32_t kNoEdge = 0xffffffffu;

FlatMap64* g_funcs;
FlatMap64* g_edges;
std::vector<Counters> g_f, g_e;
std::vector<Ctx> g_stack;

uint32_t fid(const void* key) {
  const auto k = reinterpret_cast<uint64_t>(key);
  uint32_t id = g_funcs->find(k);
  if (id != FlatMap64::kMissing) return id;
  id = static_cast<uint32_t>(g_f.size());
  g_f.emplace_back();
  g_funcs->insert(k, id);
  return id;
}

inline void enter(uint32_t func) {
  ++g_f[func].level;
  uint32_t edge = kNoEdge;
  if (!g_stack.empty()) {
    const uint64_t key = ((static_cast<uint64_t>(g_stack.back().func) << 32) | func) + 1;
    edge = g_edges->find(key);
    if (edge == FlatMap64::kMissing) {
      edge = static_cast<uint32_t>(g_e.size());
      g_e.emplace_back();
      g_edges->insert(key, edge);
    }
    ++g_e[edge].level;
  }
  g_stack.push_back(Ctx{func, edge, now_ns(), 0});
}
inline void account(Counters& c, int64_t tt, int64_t it) {
  if (--c.level == 0) c.total_ns += tt; else ++c.recursive;
  c.inline_ns += it;
  ++c.calls;
}
inline void leave() {
  if (g_stack.empty()) return;
  const int64_t now = now_ns();
  const Ctx c = g_stack.back();
  g_stack.pop_back();
  const int64_t tt = now - c.t0;
  if (!g_stack.empty()) g_stack.back().sub += tt;
  account(g_f[c.func], tt, tt - c.sub);
  if (c.edge != kNoEdge) account(g_e[c.edge], tt, tt - c.sub);
}

// ---- legacy profile hook, as tracer.cc ----
int hook(PyObject*, PyFrameObject* frame, int what, PyObject* arg) {
  switch (what) {
    case PyTrace_CALL: {
      PyCodeObject* code = PyFrame_GetCode(frame);
      enter(fid(code));
      Py_DECREF(code);
      break;
    }
    case PyTrace_RETURN: leave(); break;
    case PyTrace_C_CALL:
      if (PyCFunction_Check(arg)) enter(fid(reinterpret_cast<PyCFunctionObject*>(arg)->m_ml));
      break;
    case PyTrace_C_RETURN:
    case PyTrace_C_EXCEPTION:
      if (PyCFunction_Check(arg)) leave();
      break;
  }
  return 0;
}

// ---- sys.monitoring callbacks ----
PyObject* g_missing = nullptr;
// The C function behind a CALL's callable, as the legacy layer and
// _lsprof pick them: a builtin, or a method descriptor with a self argument
// (its PyMethodDef directly: no bound method is made).
inline const void* c_key(PyObject* callable, PyObject* arg0) {
  if (PyCFunction_Check(callable)) return reinterpret_cast<PyCFunctionObject*>(callable)->m_ml;
  if (Py_IS_TYPE(callable, &PyMethodDescr_Type) && arg0 != g_missing)
    return reinterpret_cast<PyMethodDescrObject*>(callable)->d_method;
  return nullptr;
}
PyObject* m_start(PyObject*, PyObject* const* args, Py_ssize_t) {
  enter(fid(args[0]));
  Py_RETURN_NONE;
}
PyObject* m_leave(PyObject*, PyObject* const*, Py_ssize_t) {
  leave();
  Py_RETURN_NONE;
}
PyObject* m_call(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n >= 4) {
    const void* k = c_key(args[2], args[3]);
    if (k != nullptr) enter(fid(k));
  }
  Py_RETURN_NONE;
}
PyObject* m_creturn(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n >= 4 && c_key(args[2], args[3]) != nullptr) leave();
  Py_RETURN_NONE;
}

PyMethodDef cb_defs[] = {
    {"py_start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(m_start)), METH_FASTCALL, nullptr},
    {"py_leave", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(m_leave)), METH_FASTCALL, nullptr},
    {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(m_call)), METH_FASTCALL, nullptr},
    {"c_return", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(m_creturn)), METH_FASTCALL, nullptr},
    {nullptr, nullptr, 0, nullptr}};

void reset() {
  delete g_funcs;
  delete g_edges;
  g_funcs = new FlatMap64(1024);
  g_edges = new FlatMap64(256);
  g_f.clear();
  g_e.clear();
  g_stack.clear();
  g_stack.reserve(256);
}

PyObject* legacy_start(PyObject*, PyObject*) {
  reset();
  PyEval_SetProfile(hook, nullptr);
  Py_RETURN_NONE;
}
PyObject* legacy_stop(PyObject*, PyObject*) {
  PyEval_SetProfile(nullptr, nullptr);
  Py_RETURN_NONE;
}
PyObject* total_calls(PyObject*, PyObject*) {
  uint64_t n = 0;
  for (auto& c : g_f) n += c.calls;
  return PyLong_FromUnsignedLongLong(n);
}
// Returns the callbacks (py_start, py_leave, call, c_return) for Python to
// register with sys.monitoring (the consuming side has no C API).
PyObject* mon_callbacks(PyObject*, PyObject* missing) {
  reset();
  Py_XINCREF(missing);
  g_missing = missing;
  PyObject* t = PyTuple_New(4);
  for (int i = 0; i < 4; ++i) PyTuple_SET_ITEM(t, i, PyCFunction_New(&cb_defs[i], nullptr));
  return t;
}

PyMethodDef defs[] = {{"legacy_start", legacy_start, METH_NOARGS, nullptr},
                      {"legacy_stop", legacy_stop, METH_NOARGS, nullptr},
                      {"total_calls", total_calls, METH_NOARGS, nullptr},
                      {"mon_callbacks", mon_callbacks, METH_O, nullptr},
                      {nullptr, nullptr, 0, nullptr}};
PyModuleDef mod = {PyModuleDef_HEAD_INIT, "monproto", nullptr, -1, defs};
}  // namespace

PyMODINIT_FUNC PyInit_monproto() { return PyModule_Create(&mod); }
