#include "analyze/gpu/gpu_report.h"

#include "analyze/diagnosis.h"
#include "core/timing.h"

namespace torchneck::gpu {

GpuReport gpu_report(const Run& run) {
  GpuReport r;
  r.path = run.activities.source;
  r.rank = run.rank.rank;
  r.hta = hta_breakdowns(run);
  timing_phase("GPU: HTA breakdowns", 4);
  r.facts = gpu_facts(run);
  timing_phase("GPU: kernels, syncs, launches", 4);
  TbOverviewAndMetrics tb = tb_overview_and_metrics(run);
  r.tb = std::move(tb.overview);
  r.metrics = std::move(tb.metrics);
  timing_phase("GPU: TensorBoard plugin's", 4);
  DiagnosisInput gpu_evidence;  // no CPU evidence: the GPU detectors read only this report
  gpu_evidence.gpu = &r;
  r.findings = run_detectors(gpu_evidence, Evidence::kGpu);
  return r;
}

}  // namespace torchneck::gpu
