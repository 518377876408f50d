// The CPU side of a Kineto trace as a Run, so that the analyses of a live
// run (steps and their phases, operator tables, CPU-side findings) apply to
// an analysed trace unchanged: cpu_op events become operators (autograd
// engine functions become backward nodes), user annotations and the
// ProfilerStep / DataLoader / Optimizer scopes become user scopes, with
// self and total times from their nesting on each thread.
#pragma once

#include "ingest/kineto_trace.h"
#include "model/run.h"

namespace torchneck {

Run run_from_trace(const kineto::Trace& trace);

}  // namespace torchneck
