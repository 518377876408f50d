#include "compare/diff.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace torchneck::compare {
namespace {

// Rows of the same name summed (a Python function defined twice in a file).
std::map<std::string, double> by_name(const std::vector<Row>& rows) {
  std::map<std::string, double> m;
  for (const Row& r : rows) m[r.name] += r.ms_per_step;
  return m;
}

std::vector<Mover> movers(const std::vector<Row>& before, const std::vector<Row>& after, size_t top) {
  const auto b = by_name(before), a = by_name(after);
  std::vector<Mover> out;
  for (const auto& [name, ms] : b) {
    Mover m{name, ms, 0, 0, true, false};
    if (auto it = a.find(name); it != a.end()) {
      m.after_ms = it->second;
      m.in_after = true;
    }
    out.push_back(m);
  }
  for (const auto& [name, ms] : a)
    if (b.count(name) == 0) out.push_back(Mover{name, 0, ms, 0, false, true});
  for (Mover& m : out) m.delta_ms = m.after_ms - m.before_ms;
  std::stable_sort(out.begin(), out.end(),
                   [](const Mover& x, const Mover& y) { return std::fabs(x.delta_ms) > std::fabs(y.delta_ms); });
  if (out.size() > top) out.resize(top);
  return out;
}

bool serious(const std::string& severity) { return severity == "medium" || severity == "high"; }

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string no_interval_reason(const RunDiff& d) {
  if (std::min(d.before_steps, d.after_steps) >= kMinSteps) return "the steady steps before took no time";
  return "too few steady steps: " + std::to_string(d.before_steps) + " before, " + std::to_string(d.after_steps) +
         " after (an interval needs " + std::to_string(kMinSteps) + " in each)";
}

const char* state_name(FindingState s) {
  switch (s) {
    case FindingState::kResolved: return "resolved";
    case FindingState::kNew: return "new";
    case FindingState::kKept: return "kept";
  }
  return "kept";
}

Gate slower_gate(const RunDiff& d, double pct) {
  if (!d.ci95_pct) return Gate::kUndecided;
  return d.significant && d.change_pct > pct && d.ci95_pct->low > 0 ? Gate::kSlower : Gate::kPass;
}

RunDiff diff_profiles(ProfileView before, ProfileView after, const DiffOptions& options) {
  RunDiff d;
  d.before = std::move(before);
  d.after = std::move(after);
  const ProfileView& b = d.before;
  const ProfileView& a = d.after;
  d.noise_floor_pct = options.noise_floor_pct;
  d.same_script = base_name(b.script) == base_name(a.script);
  if (!d.same_script)
    d.notes.push_back("different scripts: " + b.script + " before, " + a.script + " after");
  if (b.torch_version != a.torch_version && !b.torch_version.empty() && !a.torch_version.empty())
    d.notes.push_back("different torch: " + b.torch_version + " before, " + a.torch_version + " after");

  d.before_steps = b.steady_ms.size();
  d.after_steps = a.steady_ms.size();
  d.before_ms = mean_of(b.steady_ms);
  d.after_ms = mean_of(a.steady_ms);
  const size_t n = std::min(d.before_steps, d.after_steps);
  d.block_length = block_length_for(n);
  if (d.before_ms > 0) d.change_pct = 100.0 * (d.after_ms / d.before_ms - 1.0);
  if (n >= kMinSteps && d.before_ms > 0) {
    d.method = "moving-block bootstrap of the steady steps' mean step time, " + std::to_string(options.resamples) +
               " resamples of blocks of " + std::to_string(d.block_length) +
               " consecutive steps in each run, 2.5th-97.5th percentile, expanded for few steps";
    d.ci95_pct = bootstrap_change_ci(b.steady_ms, a.steady_ms, d.block_length, options.resamples, options.seed);
    d.significant = (d.ci95_pct->low > 0 || d.ci95_pct->high < 0) && std::fabs(d.change_pct) >= d.noise_floor_pct;
  } else {
    d.method = "none, " + no_interval_reason(d);
    d.notes.push_back(no_interval_reason(d) + ": no interval, nothing called significant");
  }

  std::vector<Row> pb, pa;
  for (const PhaseView& p : b.phases) pb.push_back({p.name, p.ms});
  for (const PhaseView& p : a.phases) pa.push_back({p.name, p.ms});
  d.phases = movers(pb, pa, pb.size() + pa.size());
  d.layers = movers(b.layers, a.layers, options.top);
  d.ops = movers(b.ops, a.ops, options.top);
  d.python = movers(b.python, a.python, options.top);

  std::map<std::string, const FindingView*> fb, fa;
  for (const FindingView& f : b.findings)
    if (serious(f.severity)) fb.emplace(f.id, &f);
  for (const FindingView& f : a.findings)
    if (serious(f.severity)) fa.emplace(f.id, &f);
  for (const auto& [id, f] : fb) {
    FindingChange c;
    c.id = id;
    c.severity_before = f->severity;
    c.title = f->title;
    if (auto it = fa.find(id); it != fa.end()) {
      c.state = FindingState::kKept;
      c.severity_after = it->second->severity;
    } else {
      c.state = FindingState::kResolved;
      if (f->estimated_gain_pct) c.estimated_change_pct = -*f->estimated_gain_pct;
      if (f->measured_gain_pct) c.try_change_pct = -*f->measured_gain_pct;
    }
    d.findings.push_back(c);
  }
  for (const auto& [id, f] : fa)
    if (fb.count(id) == 0) {
      FindingChange c;
      c.id = id;
      c.state = FindingState::kNew;
      c.severity_after = f->severity;
      c.title = f->title;
      d.findings.push_back(c);
    }
  std::stable_sort(d.findings.begin(), d.findings.end(),
                   [](const FindingChange& x, const FindingChange& y) { return x.state < y.state; });
  // A finding that came or went while the step time did not move: its
  // measure likely sits near its threshold in both runs (two runs of one
  // setting can do this), not a fix or a regression.
  if (!d.significant && d.ci95_pct)
    for (const FindingChange& c : d.findings)
      if (c.state != FindingState::kKept)
        d.notes.push_back(c.id + " is " + state_name(c.state) +
                          " with no significant change in step time: likely near its threshold in both runs");
  return d;
}

}  // namespace torchneck::compare
