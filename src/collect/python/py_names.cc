#include "collect/python/py_names.h"

namespace torchneck {

std::string utf8_of(PyObject* str) {
  if (str == nullptr || !PyUnicode_Check(str)) return "";
  Py_ssize_t len = 0;
  const char* data = PyUnicode_AsUTF8AndSize(str, &len);
  if (data != nullptr) return std::string(data, static_cast<size_t>(len));
  // A name holding lone surrogates (bytes of a file name that are not
  // UTF-8, as Python decodes them): those bytes again, shown escaped later.
  PyErr_Clear();
  PyObject* bytes = PyUnicode_AsEncodedString(str, "utf-8", "surrogateescape");
  if (bytes == nullptr) {
    PyErr_Clear();
    return "";
  }
  std::string out(PyBytes_AS_STRING(bytes), static_cast<size_t>(PyBytes_GET_SIZE(bytes)));
  Py_DECREF(bytes);
  return out;
}

PyFuncName name_of_code(PyCodeObject* code) {
  PyFuncName n;
  PyObject* name = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_name");
  PyObject* file = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_filename");
  PyObject* line = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_firstlineno");
  n.function = utf8_of(name);
  n.file = utf8_of(file);
  n.line = line ? static_cast<int>(PyLong_AsLong(line)) : 0;
  Py_XDECREF(name);
  Py_XDECREF(file);
  Py_XDECREF(line);
  if (PyErr_Occurred()) PyErr_Clear();
  return n;
}

PyFuncName name_of_cfunction(PyObject* obj) {
  PyFuncName n;
  n.file = "~";
  n.builtin = true;
  if (!PyCFunction_Check(obj)) {
    PyObject* r = PyObject_Repr(obj);
    n.function = utf8_of(r);
    Py_XDECREF(r);
    if (PyErr_Occurred()) PyErr_Clear();
    return n;
  }
  auto* fn = reinterpret_cast<PyCFunctionObject*>(obj);
  const char* ml_name = fn->m_ml->ml_name;
  if (fn->m_self == nullptr) {
    // Built-in function: "<module.name>", or "<name>" for builtins.
    PyObject* mod = fn->m_module;
    std::string modname;
    if (mod != nullptr) {
      if (PyUnicode_Check(mod)) {
        modname = utf8_of(mod);
      } else if (PyModule_Check(mod)) {
        PyObject* m = PyModule_GetNameObject(mod);
        modname = utf8_of(m);
        Py_XDECREF(m);
      }
    }
    if (PyErr_Occurred()) PyErr_Clear();
    if (!modname.empty() && modname != "builtins") {
      n.function = "<" + modname + "." + ml_name + ">";
    } else {
      n.function = std::string("<") + ml_name + ">";
    }
    return n;
  }
  // Built-in method: repr(getattr(type(self), name)) when the type has it.
  PyObject* name = PyUnicode_FromString(ml_name);
  if (name != nullptr) {
    PyObject* mo = _PyType_Lookup(Py_TYPE(fn->m_self), name);  // borrowed
    Py_DECREF(name);
    if (mo != nullptr) {
      Py_INCREF(mo);
      PyObject* r = PyObject_Repr(mo);
      Py_DECREF(mo);
      if (r != nullptr) {
        n.function = utf8_of(r);
        Py_DECREF(r);
        return n;
      }
    }
  }
  PyErr_Clear();
  PyObject* mod = fn->m_module;
  if (mod != nullptr && PyUnicode_Check(mod)) {
    n.function = "<built-in method " + utf8_of(mod) + "." + ml_name + ">";
  } else {
    n.function = std::string("<built-in method ") + ml_name + ">";
  }
  return n;
}

}  // namespace torchneck
