// record_function's __enter__ / __exit__ wrapped (see the header). The
// functions in the class's place are built from torch's own source by
// python/torchneck/record_function_wrap.py (TorchScript compiles the class
// from that source); in eager Python they call scope_enter / scope_exit.
//
// __enter__: torch's own first, its RecordFunction's start skipped by our
// callbacks (skip_user_scope_callbacks), then our frame, its key kept on the
// instance. __exit__: our frame ended first (a step boundary's time is the
// end of the user's code, and the switch it may make is done before
// torch's scope ends), then torch's own.
#include "collect/python/record_function_scopes.h"

#include <Python.h>

#include <cstdint>
#include <string_view>

#include "collect/torch/op_observer.h"

namespace torchneck {
namespace {

struct Wrapped {
  PyObject* cls = nullptr;        // record_function (strong)
  PyObject* enter = nullptr;      // its __enter__ as found (strong)
  PyObject* exit = nullptr;       // its __exit__ as found (strong)
  PyObject* our_enter = nullptr;  // the functions put in their place (strong)
  PyObject* our_exit = nullptr;
};
Wrapped* g_wrapped = nullptr;  // GIL-protected; null when the class is its own again
// The last wrap's originals, never released: a `with` looks __exit__ up
// before it enters, so a scope entered before stop exits through our
// function after it (a few objects leaked per session).
Wrapped* g_originals = nullptr;
PyObject* g_key_attr = nullptr;   // "_torchneck_scope", interned, immortal here
PyObject* g_name_attr = nullptr;  // "name"

// scope_enter(instance): torch's __enter__ and our frame.
PyObject* scope_enter(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  const Wrapped* w = g_originals;  // set before our functions were installed
  if (nargs != 1) {
    PyErr_SetString(PyExc_TypeError, "record_function.__enter__ takes no arguments");
    return nullptr;
  }
  PyObject* self = args[0];
  skip_user_scope_callbacks(true);
  PyObject* result = PyObject_Vectorcall(w->enter, &self, 1, nullptr);
  skip_user_scope_callbacks(false);
  if (result == nullptr) return nullptr;
  PyObject* name = PyObject_GetAttr(self, g_name_attr);
  Py_ssize_t size = 0;
  const char* text = name != nullptr && PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &size) : nullptr;
  if (text == nullptr) {  // not a scope we can name: torch's alone
    PyErr_Clear();
    Py_XDECREF(name);
    return result;
  }
  const uint64_t key = begin_user_scope(std::string_view(text, static_cast<size_t>(size)));
  Py_DECREF(name);
  if (key != 0) {
    PyObject* k = PyLong_FromUnsignedLongLong(key);
    if (k == nullptr || PyObject_SetAttr(self, g_key_attr, k) != 0) {  // e.g. a subclass with __slots__
      PyErr_Clear();
      end_user_scope(key);
    }
    Py_XDECREF(k);
  }
  return result;
}

// scope_exit(instance, *exit_args): our frame's end, then torch's __exit__.
PyObject* scope_exit(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  const Wrapped* w = g_originals;
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "record_function.__exit__ needs its instance");
    return nullptr;
  }
  PyObject* self = args[0];
  // The script's exception, if any, is in args, not set: nothing to save.
  PyObject* k = PyObject_GetAttr(self, g_key_attr);
  if (k == nullptr) {
    PyErr_Clear();  // entered before the wrap, or not recorded
  } else {
    const uint64_t key = PyLong_Check(k) ? PyLong_AsUnsignedLongLong(k) : 0;
    if (PyErr_Occurred()) PyErr_Clear();
    Py_DECREF(k);
    if (key != 0 && key != static_cast<uint64_t>(-1)) {
      end_user_scope(key);
      if (PyObject_SetAttr(self, g_key_attr, Py_None) != 0) PyErr_Clear();
    }
  }
  skip_user_scope_callbacks(true);  // its RecordFunction's end, as its start
  PyObject* result = PyObject_Vectorcall(w->exit, args, static_cast<size_t>(nargs), nullptr);
  skip_user_scope_callbacks(false);
  return result;
}

PyMethodDef g_enter_def = {"_torchneck_scope_enter", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(scope_enter)),
                           METH_FASTCALL, "torchneck: torch's record_function.__enter__, the scope recorded"};
PyMethodDef g_exit_def = {"_torchneck_scope_exit", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(scope_exit)),
                          METH_FASTCALL, "torchneck: torch's record_function.__exit__, the scope recorded"};

// record_function_wrap.wrap(original, native): the function for the class.
PyObject* wrapped(PyObject* wrap, PyObject* original, PyMethodDef* def) {
  PyObject* native = PyCFunction_New(def, nullptr);
  if (native == nullptr) return nullptr;
  PyObject* made = PyObject_CallFunctionObjArgs(wrap, original, native, nullptr);
  Py_DECREF(native);
  return made;
}

void release(Wrapped* w) {
  Py_XDECREF(w->cls);
  Py_XDECREF(w->enter);
  Py_XDECREF(w->exit);
  Py_XDECREF(w->our_enter);
  Py_XDECREF(w->our_exit);
  delete w;
}

}  // namespace

bool start_record_function_scopes(std::string* error) {
  auto fail = [&](const char* what) {
    PyErr_Clear();
    if (error != nullptr) *error = std::string("record_function scopes: ") + what + "; they are recorded by a RecordFunction callback";
    return false;
  };
  if (g_wrapped != nullptr) return fail("already wrapped");
  if (g_key_attr == nullptr) g_key_attr = PyUnicode_InternFromString("_torchneck_scope");
  if (g_name_attr == nullptr) g_name_attr = PyUnicode_InternFromString("name");
  if (g_key_attr == nullptr || g_name_attr == nullptr) return fail("out of memory");
  PyObject* module = PyImport_ImportModule("torch.autograd.profiler");
  if (module == nullptr) return fail("torch.autograd.profiler cannot be imported");
  auto* w = new Wrapped();
  w->cls = PyObject_GetAttrString(module, "record_function");
  Py_DECREF(module);
  if (w->cls == nullptr || !PyType_Check(w->cls)) {
    release(w);
    return fail("torch.autograd.profiler has no record_function class");
  }
  w->enter = PyObject_GetAttrString(w->cls, "__enter__");
  w->exit = PyObject_GetAttrString(w->cls, "__exit__");
  PyObject* helper = PyImport_ImportModule("torchneck.record_function_wrap");
  PyObject* wrap = helper != nullptr ? PyObject_GetAttrString(helper, "wrap") : nullptr;
  Py_XDECREF(helper);
  if (wrap != nullptr && w->enter != nullptr && w->exit != nullptr) {
    w->our_enter = wrapped(wrap, w->enter, &g_enter_def);
    w->our_exit = wrapped(wrap, w->exit, &g_exit_def);
  }
  Py_XDECREF(wrap);
  if (w->our_enter == nullptr || w->our_exit == nullptr) {
    release(w);
    return fail("record_function's __enter__/__exit__ cannot be wrapped");
  }
  g_wrapped = g_originals = w;  // before the class holds them (the last originals: leaked, see above)
  if (PyObject_SetAttrString(w->cls, "__enter__", w->our_enter) != 0 ||
      PyObject_SetAttrString(w->cls, "__exit__", w->our_exit) != 0) {
    PyErr_Clear();
    PyObject_SetAttrString(w->cls, "__enter__", w->enter);
    PyObject_SetAttrString(w->cls, "__exit__", w->exit);
    PyErr_Clear();
    g_wrapped = nullptr;  // g_originals stays: one of them may have been installed a moment
    return fail("record_function's methods cannot be replaced");
  }
  return true;
}

void stop_record_function_scopes() {
  Wrapped* w = g_wrapped;
  if (w == nullptr) return;
  // Put back only what is still ours (something else may have wrapped it since).
  PyObject* now_enter = PyObject_GetAttrString(w->cls, "__enter__");
  if (now_enter == w->our_enter) PyObject_SetAttrString(w->cls, "__enter__", w->enter);
  Py_XDECREF(now_enter);
  PyObject* now_exit = PyObject_GetAttrString(w->cls, "__exit__");
  if (now_exit == w->our_exit) PyObject_SetAttrString(w->cls, "__exit__", w->exit);
  Py_XDECREF(now_exit);
  PyErr_Clear();
  g_wrapped = nullptr;  // w stays as g_originals
}

}  // namespace torchneck
