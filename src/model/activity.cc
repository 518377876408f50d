#include "model/activity.h"

#include <algorithm>

namespace torchneck {

const char* activity_kind_name(ActivityKind k) {
  switch (k) {
    case ActivityKind::kCpuOp: return "cpu_op";
    case ActivityKind::kUserAnnotation: return "user_annotation";
    case ActivityKind::kGpuUserAnnotation: return "gpu_user_annotation";
    case ActivityKind::kKernel: return "kernel";
    case ActivityKind::kMemcpy: return "gpu_memcpy";
    case ActivityKind::kMemset: return "gpu_memset";
    case ActivityKind::kRuntime: return "cuda_runtime";
    case ActivityKind::kDriver: return "cuda_driver";
    case ActivityKind::kSync: return "cuda_sync";
    case ActivityKind::kPythonFunction: return "python_function";
    case ActivityKind::kTrace: return "Trace";
    case ActivityKind::kOther: return "other";
  }
  return "other";
}

void index_streams(Activities& a) {
  a.streams.clear();
  // Few streams (a handful per device): a linear search beats a map.
  for (const Activity& e : a.events) {
    if (!is_gpu_work(e.cat)) continue;
    const int64_t device = e.device >= 0 ? e.device : e.pid;
    const int64_t stream = e.stream >= 0 ? e.stream : e.tid;
    StreamInfo* s = nullptr;
    for (StreamInfo& x : a.streams)
      if (x.device == device && x.stream == stream) {
        s = &x;
        break;
      }
    if (s == nullptr) {
      a.streams.push_back({device, stream});
      s = &a.streams.back();
    }
    s->kernels += e.cat == ActivityKind::kKernel;
    s->memcpys += e.cat == ActivityKind::kMemcpy;
    s->memsets += e.cat == ActivityKind::kMemset;
    s->busy_ns += e.dur_ns;
  }
  std::sort(a.streams.begin(), a.streams.end(), [](const StreamInfo& x, const StreamInfo& y) {
    return x.device != y.device ? x.device < y.device : x.stream < y.stream;
  });
}

}  // namespace torchneck
