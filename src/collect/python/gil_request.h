// Asking for the GIL sooner while the sampler waits for it (see sampler.cc's
// header on bias): the switch interval lowered for the wait only, and on
// 3.13 the main thread asked to drop the GIL. Everything version-specific
// about reaching CPython's GIL is here.
#pragma once

#include <Python.h>

namespace torchneck {

// GIL held, at the sampler's start. Whether the interval can be lowered on
// this interpreter (when not, the report says so in a note).
bool prepare_gil_request(PyInterpreterState* interp);

// Without the GIL: begin just before PyGILState_Ensure, end right after it.
struct GilRequest {
  unsigned long lowered_from = 0;
  bool drop_requested = false;
};
GilRequest begin_gil_request();
void end_gil_request(const GilRequest& r);

}  // namespace torchneck
