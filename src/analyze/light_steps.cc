#include "analyze/light_steps.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/stats.h"

namespace torchneck {

namespace {

constexpr int kOther = static_cast<int>(Phase::kOther);
constexpr int kBackward = static_cast<int>(Phase::kBackward);
constexpr int kEvaluation = static_cast<int>(Phase::kEvaluation);

int64_t row_of(const JointPhases& j, int q) {
  int64_t row = 0;
  for (int p = 0; p < kNumPhases; ++p) row += j[static_cast<size_t>(q * kNumPhases + p)];
  return row;
}

// A light step's time in light phase q (its launcher's work out of "other").
int64_t light_time(const Step& st, int q) {
  return st.breakdown.ns[q] - (q == kOther ? st.tool_ns : 0);
}

// How many times a typical step's work a step holds, as its backward
// passes show it (the backward scope's time over its level; 1 with none):
// a step that ran the loop body twice (an optimizer step skipped on
// overflow: grad_scaler) holds twice the forward too, not extra work.
double work_multiple(double backward, double backward_level) {
  return backward_level > 0 && backward > backward_level ? backward / backward_level : 1.0;
}

// A typical level near steps[order[k]]: the median of time(j) > 0 over the
// steps order[m] (indices, increasing) within kLevelRadius steps of it.
template <class Time>
double level_near(const std::vector<size_t>& order, size_t k, Time time, std::vector<double>& buf) {
  buf.clear();
  for (size_t m = k; m-- > 0 && order[k] - order[m] <= kLevelRadius;)
    if (const int64_t x = time(order[m]); x > 0) buf.push_back(static_cast<double>(x));
  for (size_t m = k; m < order.size() && order[m] - order[k] <= kLevelRadius; ++m)
    if (const int64_t x = time(order[m]); x > 0) buf.push_back(static_cast<double>(x));
  return buf.empty() ? 0.0 : median(buf);
}

// A light step's evaluation is what its own light events show (DataLoader
// fetch runs, model.eval() marks; steps.cc), never a share of its other
// phases: a window that held the first steps' text sampling under no_grad
// would give every later step that much "evaluation". The row of light
// phase q (not evaluation) so gives evaluation nothing, renormalised.
void only_seen_evaluation(double (&row)[kNumPhases], int q) {
  row[kEvaluation] = 0;
  double total = 0;
  for (double v : row) total += v;
  for (int p = 0; p < kNumPhases; ++p) row[p] = total > 0 ? row[p] / total : (p == q ? 1.0 : 0.0);
}

}  // namespace

LightSplit learn_light_split(const std::vector<JointPhases>& joint, const std::vector<size_t>& used) {
  LightSplit s{};
  std::vector<double> buf;
  auto time_in = [&joint](int phase) { return [&joint, phase](size_t i) { return row_of(joint[i], phase); }; };
  for (int q = 0; q < kNumPhases; ++q) {
    // Each detailed step's time in light phase q, and the part of it up to
    // its typical level (that of the detailed steps near it, scaled by its
    // work); what is beyond twice that makes it atypical in q.
    std::vector<int64_t> rows(used.size());
    std::vector<double> caps(used.size());
    for (size_t k = 0; k < used.size(); ++k) {
      rows[k] = row_of(joint[used[k]], q);
      const double multiple = work_multiple(static_cast<double>(row_of(joint[used[k]], kBackward)),
                                            level_near(used, k, time_in(kBackward), buf));
      caps[k] = level_near(used, k, time_in(q), buf) * multiple;
    }
    auto atypical = [&](size_t k) { return static_cast<double>(rows[k]) > kAtypicalFactor * caps[k]; };
    // Typical: each phase's median share over the typical steps.
    double total = 0;
    for (int p = 0; p < kNumPhases; ++p) {
      buf.clear();
      for (size_t k = 0; k < used.size(); ++k)
        if (rows[k] > 0 && !atypical(k))
          buf.push_back(static_cast<double>(joint[used[k]][static_cast<size_t>(q * kNumPhases + p)]) /
                        static_cast<double>(rows[k]));
      s.typical[q][p] = buf.empty() ? 0.0 : median(buf);
      total += s.typical[q][p];
    }
    for (int p = 0; p < kNumPhases; ++p) s.typical[q][p] = total > 0 ? s.typical[q][p] / total : (p == q ? 1.0 : 0.0);
    // Excess: the atypical steps' time beyond their typical split, pooled.
    double excess[kNumPhases] = {0, 0, 0, 0, 0, 0}, sum = 0;
    for (size_t k = 0; k < used.size(); ++k) {
      if (rows[k] <= 0 || !atypical(k)) continue;
      for (int p = 0; p < kNumPhases; ++p) {
        const double beyond =
            static_cast<double>(joint[used[k]][static_cast<size_t>(q * kNumPhases + p)]) - caps[k] * s.typical[q][p];
        if (beyond > 0) excess[p] += beyond, sum += beyond;
      }
    }
    for (int p = 0; p < kNumPhases; ++p) s.excess[q][p] = sum > 0 ? excess[p] / sum : s.typical[q][p];
    if (q != kEvaluation) {
      only_seen_evaluation(s.typical[q], q);
      only_seen_evaluation(s.excess[q], q);
    }
  }
  return s;
}

size_t estimate_light_steps(std::vector<Step>& steps, const LightSplit& split) {
  std::vector<size_t> light;  // the undetailed steps, in order
  for (size_t i = 0; i < steps.size(); ++i)
    if (!steps[i].detailed) light.push_back(i);
  std::vector<double> near;
  std::vector<StepBreakdown> est(light.size());
  for (size_t k = 0; k < light.size(); ++k) {
    const Step& st = steps[light[k]];
    // Its typical level in light phase q: the light steps' near it.
    auto level_of = [&](int q) {
      return level_near(light, k, [&](size_t i) { return light_time(steps[i], q); }, near);
    };
    const double multiple = work_multiple(static_cast<double>(light_time(st, kBackward)), level_of(kBackward));
    const double bodies = std::min(multiple, static_cast<double>(std::max(1, st.micro_batches)));
    double v[kNumPhases] = {0, 0, 0, 0, 0, 0};
    for (int q = 0; q < kNumPhases; ++q) {
      const int64_t t = light_time(st, q);
      if (t <= 0) continue;
      const double cap = level_of(q) * multiple;
      const double typical = static_cast<double>(t) > kAtypicalFactor * cap ? cap : static_cast<double>(t);
      // A step holding `multiple` times the work holds that much of each
      // phase's work, and the loop's own time between them ("other") as
      // many times as it ran the loop's body: its backward passes.
      double w[kNumPhases], sum = 0;
      for (int p = 0; p < kNumPhases; ++p) sum += w[p] = split.typical[q][p] * (p == kOther ? bodies : multiple);
      for (int p = 0; p < kNumPhases; ++p)
        v[p] += typical * (sum > 0 ? w[p] / sum : split.typical[q][p]) +
                (static_cast<double>(t) - typical) * split.excess[q][p];
    }
    int64_t assigned = 0;
    for (int p = 0; p < kNumPhases; ++p) {
      if (p == kOther) continue;
      est[k].ns[p] = static_cast<int64_t>(std::llround(v[p]));
      assigned += est[k].ns[p];
    }
    est[k].ns[kOther] = st.duration() - assigned;  // sums to the step exactly
  }
  for (size_t k = 0; k < light.size(); ++k) {
    steps[light[k]].breakdown = est[k];
    steps[light[k]].estimated = true;
  }
  return light.size();
}

}  // namespace torchneck
