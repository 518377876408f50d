// The output-folder functions of src/report/output_dir.h for the Python
// launcher (python/torchneck/output.py), so that `run` makes its folder
// exactly as `analyze` does. A free function, called from the module's
// PYBIND11_MODULE block, to keep module.cc about the profiling session.
#pragma once

#include <pybind11/pybind11.h>

namespace torchneck {

void bind_output_dir(pybind11::module_& m);

}  // namespace torchneck
