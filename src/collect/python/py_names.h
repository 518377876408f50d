// How Python callables are named in profiles: exactly as cProfile/pstats name
// them, so our python.pstats reads like cProfile's and keys can be compared.
// Called once per distinct code object / C function (first sight), never per
// event. Caller holds the GIL.
#pragma once

#include <Python.h>

#include <string>

namespace torchneck {

struct PyFuncName {
  std::string function;  // co_name, or "<built-in method builtins.len>"
  std::string file;      // co_filename, or "~" for C functions (pstats)
  int line = 0;          // co_firstlineno, 0 for C functions
  bool builtin = false;
};

PyFuncName name_of_code(PyCodeObject* code);

// cProfile's normalizeUserObj (Modules/_lsprof.c): "<len>"-style names for
// built-in functions, repr(type(self).name) for methods of built-in types.
PyFuncName name_of_cfunction(PyObject* cfunc);

// UTF-8 text of a str object ("" if it is not one); clears any error.
std::string utf8_of(PyObject* str);

// Whether interpreter shutdown has begun (then a foreign thread must not
// take the GIL: it would end inside CPython). Readable without the GIL.
inline bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

}  // namespace torchneck
