// nn.Module scopes: global forward pre-hooks and forward hooks
// (torch.nn.modules.module.register_module_forward_{pre_,}hook) implemented
// as C functions, recording (time, module, thread) enter/exit events. The
// module table (qualified names as in named_modules(), types, parameters) is
// built once at collect time, never on the hot path.
#pragma once

#include <cstddef>
#include <string>

#include "model/run.h"

namespace torchneck {

struct ModuleScopeOptions {
  size_t events_per_thread = size_t{1} << 20;  // enter+exit events kept per thread
  size_t max_modules = 100000;                 // distinct modules tracked
};

// Caller holds the GIL; torch is imported. Returns false with *error set when
// the hooks cannot be registered (e.g. a torch without global module hooks).
bool start_module_scopes(const ModuleScopeOptions& options, std::string* error);
// Caller holds the GIL.
void stop_module_scopes();
// Caller holds the GIL; at a step boundary (the launcher's optimizer-step
// listener). The hooks follow the detail window (core/detail_window.h):
// removed while detail is off, registered again when it is back on. Global
// hooks send every module call down nn.Module._call_impl's slow path even
// when they record nothing. Once the script called torch.compile they stay
// (Dynamo's guards see global hooks: toggling them would recompile).
void sync_module_scopes_with_detail();
// Caller holds the GIL: fills run.modules and run.module_events (sorted by
// time), adds drops to run.dropped_module_events, releases the modules.
void collect_module_scopes(Run& run);
// Caller holds the GIL (the hooks only run with it). The same while the
// hooks stay installed and nothing is released (periodic spills).
void snapshot_module_scopes(Run& run);

}  // namespace torchneck
