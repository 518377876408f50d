// The analyses read a Run (src/analyze never sees ingest's types); tests
// build or load Kineto traces. These overloads turn a trace into its Run
// the way `torchneck analyze` does (run_of_trace: activities and rank moved
// in, streams indexed) and call the analysis on it.
#pragma once

#include "analyze/gpu/gpu_report.h"
#include "ingest/kineto_to_run.h"

namespace torchneck::gpu {

inline Run as_run(const kineto::Trace& t) { return run_of_trace(kineto::Trace(t)); }

inline TemporalBreakdown hta_temporal_breakdown(const kineto::Trace& t, const HtaOptions& o = {}) {
  return hta_temporal_breakdown(as_run(t), o);
}
inline std::vector<IdleStream> hta_idle_breakdown(const kineto::Trace& t, const HtaOptions& o = {}) {
  return hta_idle_breakdown(as_run(t), o);
}
inline std::vector<KernelTypeShare> hta_kernel_type_breakdown(const kineto::Trace& t, const HtaOptions& o = {}) {
  return hta_kernel_type_breakdown(as_run(t), o);
}
inline HtaBreakdowns hta_breakdowns(const kineto::Trace& t, const HtaOptions& o = {}) {
  return hta_breakdowns(as_run(t), o);
}
inline int64_t hta_rank(const kineto::Trace& t) { return hta_rank(as_run(t)); }
inline TbOverview tb_overview(const kineto::Trace& t) { return tb_overview(as_run(t)); }
inline std::vector<StepBreakdownTb> tb_step_breakdown(const kineto::Trace& t) { return tb_step_breakdown(as_run(t)); }
inline TbGpuMetrics tb_gpu_metrics(const kineto::Trace& t) { return tb_gpu_metrics(as_run(t)); }
inline TbOverviewAndMetrics tb_overview_and_metrics(const kineto::Trace& t) { return tb_overview_and_metrics(as_run(t)); }
inline std::vector<TbKernelStat> tb_kernel_stats(const kineto::Trace& t) { return tb_kernel_stats(as_run(t)); }
inline std::vector<TbOpStat> tb_op_stats(const kineto::Trace& t) { return tb_op_stats(as_run(t)); }
inline GpuFacts gpu_facts(const kineto::Trace& t, size_t top = 15) { return gpu_facts(as_run(t), top); }
inline GpuReport gpu_report(const kineto::Trace& t) { return gpu_report(as_run(t)); }

}  // namespace torchneck::gpu
