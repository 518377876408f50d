// Python's record_function scopes (torch.autograd.profiler.record_function,
// the same class as torch.profiler.record_function): its __enter__ and
// __exit__ replaced, for the session, by functions that in eager Python call
// C functions recording the scope through the operator observer's
// begin_user_scope / end_user_scope (collect/torch/op_observer.h) around
// torch's own methods, so that no RecordFunction callback needs to be
// registered for them between detail windows. (They are torch's own source
// with a guard in front, python/torchneck/record_function_wrap.py, so that
// TorchScript still compiles the class.) Torch's scopes of the loop
// are all of this class: `Optimizer.step#…` and `Optimizer.zero_grad#…`,
// `enumerate(DataLoader)#…`, `ProfilerStep#…`, the script's own.
//
// Why: any global RecordFunction callback, even one for user scopes alone
// that does nothing, costs ~1.3-2.6 % of a step of small operators (torch
// rebuilds each thread's callback list when autograd restores its state,
// twice per node; docs/overhead.md). What it leaves out between windows:
// user scopes opened in C++ (c10d Works, TorchScript's record_function),
// which the detail callbacks record in windows.
#pragma once

#include <string>

namespace torchneck {

// Caller holds the GIL; the operator observer runs. Returns false with
// *error set when the class cannot be wrapped (the observer's light
// callback then records the scopes, as before).
bool start_record_function_scopes(std::string* error);
// Caller holds the GIL: the class's own methods are put back.
void stop_record_function_scopes();

}  // namespace torchneck
