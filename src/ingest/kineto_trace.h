// A torch.profiler (Kineto) trace as ingest reads it from a Chrome-trace
// JSON file: the model's activities (model/activity.h) and the rank that
// its "distributedInfo" names. Ingest's own parse result: kineto_to_run.h
// turns it into a Run, which is what analyses and reports read.
#pragma once

#include <string>

#include "model/activity.h"

namespace torchneck::kineto {

// Ingest's names for the model's activity types.
using Cat = ActivityKind;
using Event = Activity;
using FlowCat = FlowKind;
using Flow = ActivityFlow;
using Device = DeviceInfo;
using MemoryUse = DeviceMemoryUse;
inline const char* cat_name(Cat c) { return activity_kind_name(c); }

struct Trace : Activities {
  RankInfo rank;  // from "distributedInfo"
  // "baseTimeNanoseconds" (torch >= 2.0): events' ts are system time less
  // it; 0 when absent. A live run's GPU window aligns its trace with it.
  int64_t base_time_ns = 0;
};

}  // namespace torchneck::kineto
