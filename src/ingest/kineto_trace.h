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
};

}  // namespace torchneck::kineto
