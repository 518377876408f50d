// The interval of a change of mean step time between two samples of steps,
// shared by `torchneck diff` (compare/diff.h) and `run --try`'s experiments
// (analyze/experiments.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace torchneck {

struct Interval {
  double low = 0, high = 0;
};

// The change of the mean of `after` over the mean of `before`, in %, and its
// 95 % percentile interval from a moving-block bootstrap (blocks of
// `block_length` consecutive steps, resampled circularly, so that trends and
// bursts inside a run widen the interval as they should), expanded for few
// steps (bootstrap.cc). {0, 0} when a sample is empty.
Interval bootstrap_change_ci(const std::vector<double>& before, const std::vector<double>& after, int block_length,
                             int resamples, uint64_t seed);

// max(2, round(n^(1/3))): the usual rate for a moving-block bootstrap of a
// mean, at least 2 so that a loader's bursts of 2 stay together.
int block_length_for(size_t n);

double mean_of(const std::vector<double>& v);

}  // namespace torchneck
