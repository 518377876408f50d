// python.pstats: the trace-mode Python profile in the format cProfile's
// Profile.dump_stats writes (a marshal'd dict), so `pstats.Stats(path)`,
// snakeviz and gprof2dot read it.
//   {(file, line, name): (primitive_calls, calls, tottime, cumtime,
//                         {caller_key: (calls, primitive_calls, tottime, cumtime)})}
// (the caller tuple's order is cProfile's own, see Lib/cProfile.py).
#pragma once

#include <string>

#include "model/run.h"

namespace torchneck {

std::string pstats_bytes(const Run& run);

}  // namespace torchneck
