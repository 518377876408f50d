#include "core/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace torchneck {
namespace {

// The mean of a circular block resample of v.
double resampled_mean(const std::vector<double>& v, int block, std::mt19937_64& rng) {
  const size_t n = v.size();
  const auto b = static_cast<size_t>(std::max(1, block));
  std::uniform_int_distribution<size_t> start(0, n - 1);
  double s = 0;
  size_t taken = 0;
  while (taken < n) {
    const size_t at = start(rng);
    for (size_t k = 0; k < b && taken < n; ++k, ++taken) s += v[(at + k) % n];
  }
  return s / static_cast<double>(n);
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

int block_length_for(size_t n) {
  return std::max(2, static_cast<int>(std::lround(std::cbrt(static_cast<double>(std::max<size_t>(1, n))))));
}

Interval bootstrap_change_ci(const std::vector<double>& before, const std::vector<double>& after, int block_length,
                             int resamples, uint64_t seed) {
  if (before.empty() || after.empty() || resamples < 2 || mean_of(before) <= 0) return {};
  std::mt19937_64 rng(seed);
  std::vector<double> changes;
  changes.reserve(static_cast<size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    const double b = resampled_mean(before, block_length, rng);
    const double a = resampled_mean(after, block_length, rng);
    if (b > 0) changes.push_back(100.0 * (a / b - 1.0));
  }
  if (changes.size() < 2) return {};
  // The percentile interval runs short on few steps (covering ~92 % at 40
  // steps in diff_test); Hesterberg's expansion widens it about the
  // estimate by t(0.975, n-1) / z(0.975) x sqrt(n / (n-1)), with
  // t ~ 1.96 + 2.4 / (n-1) (within 3 % of the table from 5 degrees).
  const auto n = static_cast<double>(std::min(before.size(), after.size()));
  const double df = std::max(1.0, n - 1);
  const double widen = (1.96 + 2.4 / df) / 1.96 * std::sqrt(n / df);
  const double estimate = 100.0 * (mean_of(after) / mean_of(before) - 1.0);
  const double low = percentile(changes, 0.025), high = percentile(changes, 0.975);
  return {estimate - widen * (estimate - low), estimate + widen * (high - estimate)};
}

}  // namespace torchneck
