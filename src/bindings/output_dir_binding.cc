#include "bindings/output_dir_binding.h"

#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "report/output_dir.h"

namespace py = pybind11;

namespace torchneck {

void bind_output_dir(py::module_& m) {
  // A dict rather than a bound class: the launcher keeps it as plain data.
  // std::runtime_error ("cannot write the report to DIR: why") arrives as
  // RuntimeError.
  m.def(
      "prepare_output_dir",
      [](const std::string& requested, const std::string& target) {
        const PreparedDir d = prepare_output_dir(requested, target);
        py::dict out;
        out["shown"] = d.shown;
        out["absolute"] = d.absolute;
        out["created"] = d.created;
        return out;
      },
      py::arg("requested"), py::arg("target"),
      "Creates the output folder (REQUESTED, or the default for TARGET) before any work; "
      "returns {shown, absolute, created}.");
  m.def("remove_created", &remove_created, py::arg("created"),
        "Removes the folders prepare_output_dir made, innermost first, while they are empty.");
  m.def("default_output_dir", &default_output_dir, py::arg("target"),
        "torchneck-out/<stem>-<YYYYmmdd-HHMMSS>[-N] for TARGET.");
  m.def("output_stem", &output_stem, py::arg("target"),
        "The name TARGET gives its default output folder.");
}

}  // namespace torchneck
