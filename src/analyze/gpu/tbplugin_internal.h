// What tbplugin.cc and tbplugin_tables.cc share: the plugin's event types
// and its runtime <-> device-work correlation (event_parser.py).
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "model/activity.h"

namespace torchneck::gpu::tb_detail {

inline constexpr int64_t kMax = INT64_MAX;  // sys.maxsize
inline constexpr int64_t kMin = INT64_MIN;  // -sys.maxsize - 1

using Range = std::pair<int64_t, int64_t>;
using Ranges = std::vector<Range>;
// range_utils.py (tbplugin_ranges.cc).
Ranges merge_ranges(Ranges src);
Ranges intersect(const Ranges& l1, const Ranges& l2);
Ranges subtract(const Ranges& l1, const Ranges& l2);
int64_t sum_within(const Ranges& ranges, int64_t a, int64_t b);

bool starts_with(std::string_view s, std::string_view p);
bool ends_with(std::string_view s, std::string_view p);

// trace.py EventTypes (see tbplugin.cc).
enum class Ty : uint8_t { kNone, kTrace, kOperator, kProfilerStep, kUserAnnotation, kRuntime, kKernel, kMemcpy, kMemset, kPythonFunction };
Ty type_of(const Activities& t, const Activity& e);
std::vector<Ty> types_of(const Activities& t);
bool is_comm_op_name(std::string_view n);
bool is_dataloader_name(std::string_view n);

// NodeParserMixin._parse_node: runtime <-> device work by correlation id.
struct Correlated {
  struct Rt {
    int64_t start, end;
    int64_t ext, tid;
    int64_t dev_min = kMax, dev_max = kMin;  // over its device nodes
    std::vector<uint32_t> devs;              // RuntimeNode.device_nodes
  };
  struct Dev {
    int64_t start, end;
    uint32_t event;
    int32_t owner = -1;  // index into rts; -1: never launched by a seen runtime
  };
  std::vector<Rt> rts;
  std::vector<Dev> devs;
};
Correlated correlate(const Activities& t, const std::vector<Ty>& types);
// External ids of the ops named like NCCL/Gloo collectives (Communication).
std::unordered_set<int64_t> comm_external_ids(const Activities& t, const std::vector<Ty>& types);

}  // namespace torchneck::gpu::tb_detail
