// range_utils.py of the TensorBoard plugin, ported literally (see
// tbplugin.cc): merge, intersection and subtraction of sorted ranges.
#include <algorithm>

#include "analyze/gpu/tbplugin_internal.h"

namespace torchneck::gpu::tb_detail {

// ---- range_utils.py, ported literally (inputs sorted, merged) ----------

// merge_ranges: sort by start (stable, like list.sort), join touching ranges.
Ranges merge_ranges(Ranges src) {
  if (src.empty()) return {};
  std::stable_sort(src.begin(), src.end(), [](const Range& a, const Range& b) { return a.first < b.first; });
  Ranges out;
  out.push_back(src[0]);
  for (size_t i = 1; i < src.size(); ++i) {
    const Range& r = src[i];
    if (r.second > out.back().second) {
      if (r.first <= out.back().second) out.back().second = r.second;
      else out.push_back(r);
    }
  }
  return out;
}

// intersection_ranges_lists.
Ranges intersect(const Ranges& l1, const Ranges& l2) {
  Ranges dst;
  if (l1.empty() || l2.empty()) return dst;
  Range r1 = l1[0], r2 = l2[0];
  size_t i1 = 0, i2 = 0;
  auto pop1 = [&] { if (++i1 < l1.size()) r1 = l1[i1]; };
  auto pop2 = [&] { if (++i2 < l2.size()) r2 = l2[i2]; };
  while (i1 < l1.size()) {
    if (i2 == l2.size()) break;
    if (r2.second <= r1.first) {
      pop2();
    } else if (r2.first <= r1.first && r2.second < r1.second) {
      dst.emplace_back(r1.first, r2.second);
      r1 = {r2.second, r1.second};
      pop2();
    } else if (r2.first <= r1.first) {
      dst.push_back(r1);
      r2 = {r1.second, r2.second};
      pop1();
    } else if (r2.second < r1.second) {
      dst.push_back(r2);
      r1 = {r2.second, r1.second};
      pop2();
    } else if (r2.first < r1.second) {
      dst.emplace_back(r2.first, r1.second);
      r2 = {r1.second, r2.second};
      pop1();
    } else {
      pop1();
    }
  }
  return dst;
}

// subtract_ranges_lists.
Ranges subtract(const Ranges& l1, const Ranges& l2) {
  Ranges dst;
  if (l1.empty()) return dst;
  if (l2.empty()) return l1;
  Range r1 = l1[0], r2 = l2[0];
  size_t i1 = 0, i2 = 0;
  auto pop1 = [&] { if (++i1 < l1.size()) r1 = l1[i1]; };
  auto pop2 = [&] { if (++i2 < l2.size()) r2 = l2[i2]; };
  while (i1 < l1.size()) {
    if (i2 == l2.size()) {
      dst.push_back(r1);
      pop1();
    } else if (r2.second <= r1.first) {
      pop2();
    } else if (r2.first <= r1.first && r2.second < r1.second) {
      r1 = {r2.second, r1.second};
      pop2();
    } else if (r2.first <= r1.first) {
      r2 = {r1.second, r2.second};
      pop1();
    } else if (r2.first < r1.second) {
      dst.emplace_back(r1.first, r2.first);
      r1 = {r2.first, r1.second};
    } else {
      dst.push_back(r1);
      pop1();
    }
  }
  return dst;
}

// get_ranges_sum(intersection_ranges_lists([(a, b)], ranges)) for sorted,
// disjoint `ranges`, by binary search instead of a walk from the start: the
// plugin's per-step intersection (OverallParser.Statistics.intersection_with_step).
int64_t sum_within(const Ranges& ranges, int64_t a, int64_t b) {
  if (b <= a) return 0;
  auto it = std::upper_bound(ranges.begin(), ranges.end(), a, [](int64_t v, const Range& r) { return v < r.second; });
  int64_t s = 0;
  for (; it != ranges.end() && it->first < b; ++it) {
    const int64_t lo = std::max(it->first, a), hi = std::min(it->second, b);
    if (hi > lo) s += hi - lo;
  }
  return s;
}

}  // namespace torchneck::gpu::tb_detail
