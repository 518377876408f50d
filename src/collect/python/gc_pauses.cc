// The gc.callbacks hook (see the header). What a collection costs us: the
// interpreter builds the info dict and calls each callback twice whatever
// the callback is; ours then reads the clock, one dict lookup and a store.
#include "collect/python/gc_pauses.h"

#include <Python.h>

#include <algorithm>
#include <vector>

#include "core/clock.h"

namespace torchneck {
namespace {

struct GcState {
  GcPauseOptions options;
  std::vector<GcPause> pauses;  // reserved to options.max_pauses
  GcTotals totals;
  bool in_collection = false;
  GcPause current;
  PyObject* callback = nullptr;   // strong
  PyObject* key_generation = nullptr;
  PyObject* key_collected = nullptr;
};

GcState* g_gc = nullptr;  // GIL-protected

int64_t dict_int(PyObject* info, PyObject* key) {
  if (info == nullptr || !PyDict_Check(info)) return -1;
  PyObject* v = PyDict_GetItemWithError(info, key);  // borrowed
  if (v == nullptr) {
    PyErr_Clear();
    return -1;
  }
  const long long x = PyLong_AsLongLong(v);
  if (x == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return -1;
  }
  return x;
}

// callback(phase, info): phase is "start" or "stop".
PyObject* on_gc(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  const int64_t t = now_ns();
  GcState* st = g_gc;
  if (st == nullptr || nargs < 2 || !PyUnicode_Check(args[0]) || PyUnicode_GET_LENGTH(args[0]) < 3) Py_RETURN_NONE;
  const bool start = PyUnicode_READ_CHAR(args[0], 2) == 'a';  // "start" / "stop"
  if (start) {
    st->current = GcPause{};
    st->current.start_ns = t;
    st->current.generation = static_cast<int32_t>(std::clamp<int64_t>(dict_int(args[1], st->key_generation), 0, 2));
    st->in_collection = true;
    Py_RETURN_NONE;
  }
  if (!st->in_collection) Py_RETURN_NONE;  // installed between a start and its stop
  st->in_collection = false;
  GcPause& p = st->current;
  p.end_ns = t;
  p.collected = std::max<int64_t>(0, dict_int(args[1], st->key_collected));
  GcTotals& tot = st->totals;
  const int64_t d = p.duration();
  ++tot.collections;
  tot.total_ns += d;
  tot.max_ns = std::max(tot.max_ns, d);
  ++tot.by_generation[p.generation];
  tot.ns_by_generation[p.generation] += d;
  tot.collected += p.collected;
  if (st->pauses.size() < st->options.max_pauses) st->pauses.push_back(p);
  else ++tot.dropped;
  Py_RETURN_NONE;
}

PyMethodDef g_on_gc_def = {"_torchneck_gc_callback", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(on_gc)),
                           METH_FASTCALL, "torchneck: times a garbage collection"};

PyObject* gc_callbacks() {  // new reference, or null with no error set
  PyObject* gc = PyImport_ImportModule("gc");
  if (gc == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* cbs = PyObject_GetAttrString(gc, "callbacks");
  Py_DECREF(gc);
  if (cbs == nullptr || !PyList_Check(cbs)) {
    PyErr_Clear();
    Py_XDECREF(cbs);
    return nullptr;
  }
  return cbs;
}

void remove_callback(GcState* st) {
  if (st->callback == nullptr) return;
  PyObject* cbs = gc_callbacks();
  if (cbs != nullptr) {
    for (Py_ssize_t i = PyList_GET_SIZE(cbs); i-- > 0;)
      if (PyList_GET_ITEM(cbs, i) == st->callback) {
        PySequence_DelItem(cbs, i);
        break;
      }
    Py_DECREF(cbs);
  }
  PyErr_Clear();
  Py_CLEAR(st->callback);
}

void fill(const GcState& st, Run& run) {
  run.gc_pauses = st.pauses;
  run.gc = st.totals;
  run.gc_observed = true;
}

}  // namespace

bool start_gc_pauses(const GcPauseOptions& options, std::string* error) {
  if (g_gc != nullptr) stop_gc_pauses();
  auto* st = new GcState;
  st->options = options;
  st->pauses.reserve(options.max_pauses);
  st->key_generation = PyUnicode_InternFromString("generation");
  st->key_collected = PyUnicode_InternFromString("collected");
  st->callback = PyCFunction_New(&g_on_gc_def, nullptr);
  PyObject* cbs = gc_callbacks();
  if (cbs == nullptr || st->callback == nullptr || st->key_generation == nullptr || st->key_collected == nullptr ||
      PyList_Append(cbs, st->callback) != 0) {
    PyErr_Clear();
    Py_XDECREF(cbs);
    Py_CLEAR(st->callback);
    Py_CLEAR(st->key_generation);
    Py_CLEAR(st->key_collected);
    delete st;
    *error = "garbage collections: gc.callbacks cannot be reached; GC pauses are not measured";
    return false;
  }
  Py_DECREF(cbs);
  g_gc = st;
  return true;
}

void stop_gc_pauses() {
  if (g_gc != nullptr) remove_callback(g_gc);
}

void snapshot_gc_pauses(Run& run) {
  if (g_gc != nullptr) fill(*g_gc, run);
}

void collect_gc_pauses(Run& run) {
  GcState* st = g_gc;
  if (st == nullptr) return;
  remove_callback(st);
  fill(*st, run);
  Py_CLEAR(st->key_generation);
  Py_CLEAR(st->key_collected);
  g_gc = nullptr;
  delete st;
}

}  // namespace torchneck
