// A Kineto trace as a Run, the model every analysis and report reads:
// its activities (device work, runtime calls, CPU ops, flows, devices,
// streams, memory counters) and rank move into Run::activities and
// Run::rank; the CPU side becomes the same tables a live run has, so the
// analyses of a live run (steps and their phases, operator tables, CPU-side
// findings) apply unchanged: cpu_op events become operators (autograd
// engine functions become backward nodes), user annotations and the
// ProfilerStep / DataLoader / Optimizer scopes become user scopes, with
// self and total times from their nesting on each thread.
#pragma once

#include "ingest/kineto_trace.h"
#include "model/run.h"

namespace torchneck {

// The activities and rank only (cheap: moved, plus an index of the
// streams). The GPU analyses need no more, and `torchneck analyze` starts
// them on this while it fills the CPU side.
Run run_of_trace(kineto::Trace&& trace);

// The CPU side from run.activities: threads, the operator timeline, the
// operator table, strings, wall time. Writes no member that the GPU
// analyses read (activities, rank), so they may run meanwhile.
void add_cpu_side(Run& run);

// The trace's c10d collectives as Run::collectives (kineto_collectives.cc):
// on a GPU, each NCCL kernel (its start the rank's arrival, its end the
// completion), with collectives_on_device set; on CPU tensors, the op and
// its Work, as a live run pairs them. After add_cpu_side (it needs the
// threads and strings).
void add_collectives(Run& run);

// Both.
Run run_from_trace(kineto::Trace&& trace);

}  // namespace torchneck
