// memory_creep: resident memory rises step after step over the steady steps.
#include "analyze/diagnosis.h"

#include <cctype>

namespace torchneck {
namespace {

// Below this rise, allocator caches and lazily started thread pools move
// the resident set by tens of MiB in an ordinary run.
constexpr double kMinGrowthBytes = 32.0 * 1024 * 1024;
// ... and relative to what the process holds at the steady steps' start
// (torch alone is some 200-300 MiB): a rise below a tenth of it is noise of
// the same order as one batch more or less in flight.
constexpr double kMinGrowthShare = 0.10;
// The line must explain most of the variance: a steady climb, not one jump
// (a cache filled once, a buffer allocated on the first large batch).
constexpr double kMinR2 = 0.80;
// The second half of the steady steps must still rise at half the slope of
// the whole at least: memory that climbs and levels off is an allocator
// warming up (glibc raising its mmap threshold, caches filling), not a leak.
constexpr double kMinLateSlopeShare = 0.5;
// Fewer samples or steps say nothing about a trend.
constexpr size_t kMinSamples = 5;
constexpr size_t kMinSteadySteps = 5;
// Without a growing autograd graph to name, a rise below a quarter of the
// memory is reported at low severity: it may be a cache or the profiler's
// own allocations, and no line can be pointed at.
constexpr double kUnnamedMediumShare = 0.25;
// Half as much again within the run: an out-of-memory kill is a matter of
// time on a longer run.
constexpr double kHighGrowthShare = 0.50;
// torch's CPU allocator holds less than a fifth of the growth: the memory
// kept is not tensors (Python objects, a cache of non-tensor data), and the
// hint changes. Above it, tensors are kept, and the resident growth may be
// up to twice theirs: malloc's free space trapped between kept tensors and
// the transient ones of each step (measured: 4 MiB of tensors kept a step
// grew the resident set 6-8 MiB a step, tests/python/scripts/hoard.py).
constexpr double kNotTensorGrowthShare = 0.20;

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  const auto b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// `total_loss += loss` -> "total_loss += loss.item()"; "" when the line is
// not that simple.
std::string fixed_line(const GrowingGraph& g) {
  const auto op = g.code.find("+=");
  if (op == std::string::npos || trim(g.code.substr(0, op)) != g.variable) return "";
  const std::string rhs = trim(g.code.substr(op + 2));
  if (!is_identifier(rhs)) return "";
  return g.variable + " += " + rhs + ".item()";
}

}  // namespace

void detect_memory_creep(const DiagnosisInput& in, std::vector<Finding>& out) {
  const MemoryAnalysis& m = in.memory;
  if (!m.fitted || m.fit_samples < kMinSamples || m.span.steps() < kMinSteadySteps) return;
  const double start = static_cast<double>(std::max<int64_t>(1, m.rss_steady_start));
  // The profiler's own timelines grow too; only the rest is the script's.
  const double growth = m.growth_bytes - m.recorded_bytes;
  if (growth < kMinGrowthBytes || growth < kMinGrowthShare * start || m.fit.r2 < kMinR2) return;
  if (m.late_fit.points < 2 || m.late_fit.slope < kMinLateSlopeShare * m.fit.slope) return;
  Finding f = make_finding(FindingId::memory_creep);
  // A graph rebuilt larger each step keeps nothing (see step_time_drift).
  const GrowingGraph* g = nullptr;
  for (const GrowingGraph& c : in.growing_graphs)
    if (c.kept) {
      g = &c;
      break;
    }
  if (growth >= kHighGrowthShare * start) f.severity = Severity::kHigh;
  else if (g == nullptr && growth < kUnnamedMediumShare * start) f.severity = Severity::kLow;
  const std::string per_step = fmt_mib(m.growth_per_step_bytes) + " per step";
  if (g != nullptr) {
    const std::string where = g->line > 0 ? " (" + base_name(g->file) + ":" + std::to_string(g->line) + ": `" + g->code + "`)" : "";
    f.title = g->variable + where + " keeps every step's autograd graph alive: resident memory grows " + per_step;
    f.evidence.push_back("the autograd graph of `" + g->variable + "` (" +
                         (g->scope == "<module>" ? std::string("a global of the script") : "a local of " + g->scope + "()") +
                         ") grew from " + std::to_string(g->nodes_first) + " nodes at optimizer step " +
                         std::to_string(g->step_first) + " to " + std::to_string(g->nodes_last) +
                         (g->nodes_last >= g->nodes_cap && g->nodes_cap > 0 ? "+" : "") + " at step " +
                         std::to_string(g->step_last));
    if (g->line > 0) f.evidence.push_back("it accumulates at " + g->file + ":" + std::to_string(g->line) + ": " + g->code);
    const std::string fixed = fixed_line(*g);
    f.recommendation = "accumulate `loss.item()` (a Python number) or `loss.detach()` instead of the tensor itself" +
                       (fixed.empty() ? std::string() : ": `" + fixed + "`") +
                       "; a tensor with a grad_fn summed across steps keeps every step's graph and the activations it saved";
  } else if (m.torch_counted && m.torch_growth_bytes < kNotTensorGrowthShare * growth) {
    f.title = "Resident memory grows " + per_step + " over the steady steps, and not in tensors";
    f.recommendation = "look for Python objects kept across steps (a list or dict that grows, a cache, logged "
                       "values held as objects); tracemalloc's snapshots compared step to step show the lines that "
                       "allocate them";
  } else {
    f.title = "Resident memory grows " + per_step + " over the steady steps";
    f.recommendation = "look for tensors kept across steps: a loss summed without .item() or .detach(), outputs or "
                       "losses appended to a list, a cache keyed by batch; tracemalloc, or torch.profiler with "
                       "profile_memory=True, shows where the memory is allocated";
  }
  f.evidence.push_back("resident memory " + fmt_mib(start) + " at the start of the steady steps (step " +
                       std::to_string(m.span.first) + "), a fitted rise of " + fmt_mib(m.growth_bytes) + " (" +
                       fmt_pct(m.growth_bytes / start) + ") over steps " + std::to_string(m.span.first) + ".." +
                       std::to_string(m.span.last) + ": " + per_step +
                       (m.recorded_bytes >= 1 << 20 ? "; of it, torchneck's own timelines recorded " + fmt_mib(m.recorded_bytes)
                                                    : std::string()));
  char fit[200];
  std::snprintf(fit, sizeof fit,
                "the line explains %.0f %% of the variance of %zu samples (%.1f MiB/s; %.1f MiB/s over the second "
                "half); peak %s",
                100.0 * m.fit.r2, m.fit_samples, m.fit.slope / (1024.0 * 1024.0), m.late_fit.slope / (1024.0 * 1024.0),
                fmt_mib(static_cast<double>(m.rss_peak)).c_str());
  f.evidence.push_back(fit);
  if (m.torch_counted) {
    const double share = growth > 0 ? m.torch_growth_bytes / growth : 0;
    f.evidence.push_back("torch's CPU allocator held " + fmt_mib(static_cast<double>(m.torch_steady_start)) +
                         " at the start of the steady steps and rose " + fmt_mib(m.torch_growth_bytes) + " over them (" +
                         fmt_pct(share) + " of the resident growth): " +
                         (share < kNotTensorGrowthShare
                              ? std::string("the memory kept is not tensors")
                              : std::string("tensors are kept") +
                                    (share < 0.9 ? ", the rest is malloc's free space between them or other objects" : "")));
  }
  f.gain_arithmetic = "none: a risk (out of memory, swapping), not a cost per step";
  out.push_back(std::move(f));
}

}  // namespace torchneck
