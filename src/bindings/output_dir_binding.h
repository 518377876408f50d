// The output-folder functions of src/report/output_dir.h for the Python
// launcher (python/torchneck/output.py), so that `run` makes its folder
// exactly as `analyze` does. A free function, called from the module's
// PYBIND11_MODULE block, to keep module.cc about the profiling session.
//
// With them, what every binding that takes a path needs: a path is the
// bytes the OS gave, which need not be UTF-8 (FsPath), and text that names
// one reaches Python whatever its bytes (shown_text).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace torchneck {

// A path as the OS holds it: bytes. From Python: a str as os.fsdecode makes
// it (its lone surrogates give the bytes back), bytes, or an os.PathLike;
// to Python: the str os.fsdecode makes of the bytes.
struct FsPath {
  std::string bytes;
};

// TEXT for Python (a report, an error naming a path): bytes that are not
// UTF-8 shown as \xff, as Python's backslashreplace writes them, never raw.
pybind11::str shown_text(const std::string& text);

void bind_output_dir(pybind11::module_& m);

}  // namespace torchneck

namespace pybind11::detail {

template <>
struct type_caster<torchneck::FsPath> {
  PYBIND11_TYPE_CASTER(torchneck::FsPath, const_name("os.PathLike"));

  bool load(handle src, bool /*convert*/) {
    PyObject* bytes = nullptr;
    if (PyUnicode_FSConverter(src.ptr(), &bytes) == 0) {  // not a path, or one with a NUL byte
      PyErr_Clear();
      return false;
    }
    value.bytes.assign(PyBytes_AS_STRING(bytes), static_cast<size_t>(PyBytes_GET_SIZE(bytes)));
    Py_DECREF(bytes);
    return true;
  }

  static handle cast(const torchneck::FsPath& path, return_value_policy /*policy*/, handle /*parent*/) {
    return PyUnicode_DecodeFSDefaultAndSize(path.bytes.data(), static_cast<Py_ssize_t>(path.bytes.size()));
  }
};

}  // namespace pybind11::detail
