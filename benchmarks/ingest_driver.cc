// Loads one torch.profiler (Kineto) trace with kineto::load_trace and prints
// what it read, as one JSON line: the stand-in for `torchneck analyze` that
// benchmarks/ingest times (it compiles this file into the build folder).
//
//   ingest_driver TRACE.json[.gz]
#include <cstdio>
#include <exception>

#include "ingest/kineto_json.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TRACE.json[.gz]\n", argv[0]);
    return 2;
  }
  try {
    using namespace torchneck::kineto;
    const Trace t = load_trace(argv[1]);
    size_t kernels = 0;
    for (const Event& e : t.events) kernels += e.cat == Cat::kKernel;
    std::printf("{\"events\": %zu, \"kernels\": %zu, \"flows\": %zu, \"names\": %zu, \"devices\": %zu}\n",
                t.events.size(), kernels, t.flows.size(), t.names.size(), t.devices.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
