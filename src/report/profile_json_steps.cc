#include "report/profile_json_steps.h"

#include "analyze/summary.h"
#include "core/clock.h"

namespace torchneck {
namespace {

void write_breakdown(JsonWriter& w, const char* key, const StepBreakdown& b, bool as_pct, int64_t total) {
  w.key(key).begin_object();
  for (int p = 0; p < kNumPhases; ++p) {
    const auto phase = static_cast<Phase>(p);
    w.key(phase_name(phase));
    if (as_pct) w.value(100.0 * share(b[phase], total));
    else w.value(ns_to_ms(b[phase]));
  }
  w.end_object();
}

}  // namespace

void write_steps(JsonWriter& w, const StepAnalysis& s, size_t every) {
  w.key("steps").begin_object();
  w.field("count", static_cast<uint64_t>(s.count));
  w.field("in_window", static_cast<uint64_t>(s.steps.size()));
  w.field("source", s.source);
  w.field("count_source", s.count_source.empty() ? s.source : s.count_source);
  if (!s.count_source.empty()) w.field("counted_step_ms", ns_to_ms(s.counted_step_ns));
  w.field("warmup_excluded", static_cast<uint64_t>(s.excluded));
  w.field("steady", static_cast<uint64_t>(s.steady_count));
  w.field("gpu_window_steps", static_cast<uint64_t>(s.gpu_window_steps));
  w.field("step_ms", ns_to_ms(s.step_ns));
  w.field("median_ms", ns_to_ms(s.median_ns));
  w.field("typical_ms", ns_to_ms(s.typical_ns));
  w.field("step_cv", s.step_cv);
  write_breakdown(w, "breakdown_ms", s.breakdown, false, s.step_ns);
  write_breakdown(w, "breakdown_pct", s.breakdown, true, s.step_ns);
  w.field("evaluation_passes", static_cast<uint64_t>(s.evaluation.size()));
  w.field("evaluation_pct", 100.0 * share(s.evaluation_ns, s.window_ns));
  w.field("micro_batches_per_step", s.micro_batches_per_step);
  w.key("frozen_networks").begin_array();
  for (const FrozenForward& f : s.frozen) {
    w.begin_object();
    w.field("name", f.name);
    w.field("trained", f.trained);
    w.field("calls", f.calls);
    w.field("ms_per_step", ns_to_ms(f.ns_per_step));
    w.end_object();
  }
  w.end_array();
  w.key("slow").begin_array();
  for (const SlowGroup& g : s.slow) {
    w.begin_object();
    w.field("kind", slow_kind_name(g.kind));
    w.field("count", static_cast<uint64_t>(g.steps.size()));
    w.field("period_steps", static_cast<int64_t>(g.period));
    w.field("excess_ms", ns_to_ms(g.excess_ns));
    w.field("share_pct", 100.0 * g.share);
    w.field("phase", phase_name(g.phase));
    w.field("what", g.what);
    w.end_object();
  }
  w.end_array();
  w.field("ops_per_step", s.ops_per_step);
  const TopLevelOps& top = s.top_level_ops;
  w.key("top_level_ops").begin_object();
  w.field("per_step", top.per_step);
  w.field("ms_per_step", top.ns_per_step / 1e6);
  w.field("small_per_step", top.small_per_step);
  w.field("small_ms_per_step", top.small_ns_per_step / 1e6);
  w.field("compute_ms_per_step", top.compute_ns_per_step / 1e6);
  w.key("most_called").begin_array();
  for (const auto& [name, per_step] : top.most_called) {
    w.begin_object();
    w.field("name", name);
    w.field("per_step", per_step);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  w.field("timeline_truncated", s.timeline_truncated);
  w.key("whole_run");
  if (s.whole_run.empty()) {
    w.null();
  } else {
    const RunClocks& c = s.whole_run;
    w.begin_object();
    w.field("source", "step_clocks");
    w.field("first_step", c.first_step);
    w.field("last_step", c.last_step);
    w.field("step_ms", c.step_ns / 1e6);
    w.field("data_ms", c.data_ns / 1e6);
    if (c.cpu_ns >= 0) w.field("cpu_ms", c.cpu_ns / 1e6);
    w.field("beyond_first_step", c.beyond_first_step);
    w.field("beyond_steps", c.beyond_steps);
    w.field("beyond_step_ms", c.beyond_step_ns / 1e6);
    w.field("beyond_data_ms", c.beyond_data_ns / 1e6);
    w.field("intervals", static_cast<uint64_t>(c.intervals.size()));
    w.end_object();
  }
  w.field("detail", s.detail_mode);
  w.field("detailed_steady", static_cast<uint64_t>(s.detailed_steady));
  w.field("estimated_steps", static_cast<uint64_t>(s.estimated_steps));
  w.field("detail_excluded", static_cast<uint64_t>(s.detail_excluded));
  w.key("per_step").begin_array();
  for (size_t i = 0; i < s.steps.size(); i += every) {
    const Step& st = s.steps[i];
    w.begin_object();
    w.field("start_s", ns_to_s(st.start_ns));
    w.field("ms", ns_to_ms(st.duration()));
    w.field("steady", st.steady);
    w.field("gpu_window", st.gpu_window);
    w.field("slow", slow_kind_name(st.slow));
    w.field("micro_batches", static_cast<int64_t>(st.micro_batches));
    w.field("detailed", st.detailed);
    w.field("detail_excluded", st.detail_excluded);
    w.field("detail_cost_pct", 100.0 * st.detail_cost);
    write_breakdown(w, "breakdown_ms", st.breakdown, false, st.duration());
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

}  // namespace torchneck
