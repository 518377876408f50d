// The medians every part of the project takes: one definition each.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace torchneck {

// The median of V; of an even count, the mean of the two middle values
// (for integers, rounded toward zero). 0 for none.
template <typename T>
T median(std::vector<T> v) {
  if (v.empty()) return T{};
  const size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h), v.end());
  if (v.size() % 2 == 1) return v[h];
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h)) + v[h]) / 2;
}

// The middle element of V (of an even count, the upper of the two): a value
// that occurred, for times and counts. T{} for none.
template <typename T>
T middle_value(std::vector<T> v) {
  if (v.empty()) return T{};
  const size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h), v.end());
  return v[h];
}

}  // namespace torchneck
