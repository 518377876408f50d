// A report built without the GIL and handed to Python: its text as a str,
// and any failure as a RuntimeError of one line with a message, which the
// launcher shows as "torchneck: MESSAGE" (python/torchneck/report_cmd.py).
#pragma once

#include <pybind11/pybind11.h>

#include <new>
#include <optional>
#include <stdexcept>
#include <string>

#include "bindings/output_dir_binding.h"

namespace torchneck {

// make_report() without the GIL. A C++ exception becomes a RuntimeError whose
// message is never blank; the module's exception translator
// (output_dir_binding.cc) shows its bytes that are not UTF-8 as \xff.
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
  if (!error) return shown_text(text);
  if (error->find_first_not_of(" \t\r\n") == std::string::npos) error = "an internal error without a message";
  throw std::runtime_error(*error);  // shown as shown_text by the module's exception translator
}

}  // namespace torchneck
