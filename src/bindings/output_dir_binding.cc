#include "bindings/output_dir_binding.h"

#include <pybind11/stl.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "report/output_dir.h"

namespace py = pybind11;

namespace torchneck {

py::str shown_text(const std::string& text) {
  PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

namespace {

std::vector<FsPath> fs_paths(const std::vector<std::string>& paths) {
  std::vector<FsPath> out;
  for (const std::string& p : paths) out.push_back(FsPath{p});
  return out;
}

std::vector<std::string> path_bytes(const std::vector<FsPath>& paths) {
  std::vector<std::string> out;
  for (const FsPath& p : paths) out.push_back(p.bytes);
  return out;
}

// Every binding's std::runtime_error, whose message may name a path that is
// not UTF-8 ("cannot write the report to DIR: why"): pybind11 would raise it
// with no message at all. The exceptions pybind11 maps to other Python types
// go on to its own translator.
void translate_runtime_error(std::exception_ptr p) {
  try {
    std::rethrow_exception(p);
  } catch (const py::builtin_exception&) {
    throw;
  } catch (const std::range_error&) {
    throw;
  } catch (const std::overflow_error&) {
    throw;
  } catch (const std::runtime_error& e) {
    PyErr_SetObject(PyExc_RuntimeError, shown_text(e.what()).ptr());
  }
}

}  // namespace

void bind_output_dir(py::module_& m) {
  py::register_local_exception_translator(&translate_runtime_error);
  // A dict rather than a bound class: the launcher keeps it as plain data.
  // std::runtime_error ("cannot write the report to DIR: why") arrives as
  // RuntimeError.
  m.def(
      "prepare_output_dir",
      [](const FsPath& requested, const FsPath& target, bool shared) {
        const PreparedDir d = prepare_output_dir(requested.bytes, target.bytes,
                                                 shared ? FolderLock::kShared : FolderLock::kExclusive);
        py::dict out;
        out["shown"] = FsPath{d.shown};
        out["absolute"] = FsPath{d.absolute};
        out["created"] = fs_paths(d.created);
        return out;
      },
      py::arg("requested"), py::arg("target"), py::arg("shared") = false,
      "Creates the output folder (REQUESTED, or the default for TARGET) before any work and locks it "
      "(shared: with the other nodes' launchers of one distributed job); returns {shown, absolute, created}.");
  m.def(
      "remove_created", [](const std::vector<FsPath>& created) { remove_created(path_bytes(created)); },
      py::arg("created"), "Removes the folders prepare_output_dir made, innermost first, while they are empty.");
  m.def(
      "default_output_dir", [](const FsPath& target) { return FsPath{default_output_dir(target.bytes)}; },
      py::arg("target"), "torchneck-out/<stem>-<YYYYmmdd-HHMMSS>[-N] for TARGET.");
  m.def(
      "output_stem", [](const FsPath& target) { return FsPath{output_stem(target.bytes)}; }, py::arg("target"),
      "The name TARGET gives its default output folder.");
}

}  // namespace torchneck
