// A fixed number of samples that always spans the whole run: when the
// buffer is full every other sample is dropped and only every second tick
// is kept from then on, so the kept samples stay evenly spaced, at a period
// that doubles as the run grows. The memory sampler (MemorySample) and the
// NVML sampler (one series per GPU, NvmlSample) keep theirs this way.
// Preallocated: a tick never allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace torchneck {

template <typename Sample>
class ThinnedSeries {
 public:
  explicit ThinnedSeries(size_t capacity) : capacity_(capacity < 2 ? 2 : capacity & ~size_t{1}) {
    samples_.reserve(capacity_);
  }
  // A tick of the base interval; kept when it falls on the current stride.
  void tick(const Sample& s) {
    if (ticks_++ % stride_ != 0) return;
    make_room();
    samples_.push_back(s);
  }
  // Keeps s whatever the stride (the first and last samples of the run).
  void add(const Sample& s) {
    make_room();
    samples_.push_back(s);
  }
  const std::vector<Sample>& samples() const { return samples_; }
  int64_t stride() const { return stride_; }  // base intervals between kept samples
  size_t capacity() const { return capacity_; }
  void clear() {
    samples_.clear();
    stride_ = 1;
    ticks_ = 0;
  }

 private:
  void make_room() {
    if (samples_.size() < capacity_) return;
    // Keep samples 0, 2, 4, ...: the first one stays, and the kept ones are
    // again evenly spaced, at twice the interval.
    size_t j = 0;
    for (size_t i = 0; i < samples_.size(); i += 2) samples_[j++] = samples_[i];
    samples_.resize(j);
    stride_ *= 2;
  }
  size_t capacity_;
  std::vector<Sample> samples_;
  int64_t stride_ = 1;
  int64_t ticks_ = 0;
};

}  // namespace torchneck
