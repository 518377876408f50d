// A report built without the GIL and handed to Python: its text as a str,
// and any failure as a RuntimeError of one line with a message, which the
// launcher shows as "torchneck: MESSAGE" (python/torchneck/report_cmd.py).
#pragma once

#include <pybind11/pybind11.h>

#include <new>
#include <optional>
#include <stdexcept>
#include <string>

namespace torchneck {

// TEXT as a str, bytes that are not UTF-8 shown as U+FFFD: pybind11's own
// conversion raises UnicodeDecodeError, a traceback for the user.
inline pybind11::str python_str(const std::string& text) {
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (s == nullptr) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::str>(s);
}

// make_report() without the GIL. A C++ exception becomes a RuntimeError whose
// message is valid UTF-8 and never blank: pybind11 raises a RuntimeError
// with no message at all for a what() that is not UTF-8.
template <typename MakeReport>
pybind11::str report_for_python(MakeReport make_report) {
  std::string text;
  std::optional<std::string> error;
  {
    pybind11::gil_scoped_release nogil;
    try {
      text = make_report();
    } catch (const std::bad_alloc&) {
      error = "out of memory while making the report";
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "an unknown internal error";
    }
  }
  if (!error) return python_str(text);
  if (error->find_first_not_of(" \t\r\n") == std::string::npos) error = "an internal error without a message";
  throw std::runtime_error(python_str(*error).cast<std::string>());
}

}  // namespace torchneck
