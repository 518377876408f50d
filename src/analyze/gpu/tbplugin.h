// The PyTorch TensorBoard plugin's (tb_plugin, torch_tb_profiler) numbers,
// reproduced in C++ on a run's activities (Run::activities): the Overview's per-step breakdown
// (Kernel, Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec,
// Other), the GPU Summary (GPU utilization, Est. SM Efficiency, Est. Achieved
// Occupancy, with their timelines) and the Kernel view's table.
//
// Source of every definition: pytorch/kineto at 94979607^ (the parent of the
// plugin's removal), tb_plugin/torch_tb_profiler/profiler/{trace.py,
// event_parser.py, overall_parser.py, range_utils.py, gpu_metrics_parser.py,
// kernel_parser.py, tensor_core.py, data.py, run_generator.py}. Each function
// in tbplugin.cc names the plugin function it mirrors.
//
// Units: the plugin works in the trace's microseconds; we keep the model's
// integer nanoseconds and offer microsecond views (ns / 1000, exact for
// traces written in integer or 3-decimal µs). Ratios are unit-free.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/run.h"

namespace torchneck::gpu {

// event_parser.py ProfileRole, in the plugin's priority order: when roles
// overlap, each instant of a step counts once, for the first role here
// (overall_parser.py OverallParser.Statistics.create_from_range).
enum class TbRole : uint8_t {
  kKernel = 0,
  kMemcpy,
  kMemset,
  kCommunication,
  kRuntime,
  kDataLoader,
  kCpuExec,  // ProfileRole.CpuOp, shown as "CPU Exec"
  kOther,
};
inline constexpr int kTbRoleCount = 8;
// The column names of run_generator.py _generate_overview: "Kernel", ...,
// "CPU Exec", "Other".
const char* tb_role_name(TbRole r);

struct StepBreakdownTb {
  std::string name;  // "5" for ProfilerStep#5; "0" when the trace has no ProfilerStep
  int64_t start_ns = 0, end_ns = 0;  // after extension to the device work it launched
  std::array<int64_t, kTbRoleCount> ns{};  // per TbRole; they sum to total_ns()

  int64_t total_ns() const { return end_ns - start_ns; }
  int64_t operator[](TbRole r) const { return ns[static_cast<int>(r)]; }
  double us(TbRole r) const { return static_cast<double>(ns[static_cast<int>(r)]) / 1e3; }
  double total_us() const { return static_cast<double>(total_ns()) / 1e3; }
};

// The Overview page: per-step rows, the "Average Step Time" (mean over the
// kept steps) and which columns the plugin shows (data.py / event_parser.py
// has_runtime, has_kernel, has_memcpy_or_memset, has_communication: the
// Kernel/Memcpy/Memset and Runtime columns appear when any of the first three
// holds; Communication only when it holds).
struct TbOverview {
  std::vector<StepBreakdownTb> steps;
  std::array<double, kTbRoleCount> avg_ns{};
  double avg_total_ns = 0;
  bool has_runtime = false, has_kernel = false, has_memcpy_or_memset = false, has_communication = false;
  int removed_tail_steps = 0;  // trailing steps dropped because their kernels were not captured

  bool show_gpu_columns() const { return has_runtime || has_kernel || has_memcpy_or_memset; }
};

TbOverview tb_overview(const Run& run);
// tb_overview(t).steps.
std::vector<StepBreakdownTb> tb_step_breakdown(const Run& run);

// One GPU of the GPU Summary (gpu_metrics_parser.py GPUMetricsParser).
struct TbDeviceMetrics {
  int64_t device = 0;  // kernel args "device"
  // Busy time (union of its kernels, clipped to [steps start, steps end]) /
  // (steps end - steps start). A fraction; the page shows it x100, 2 decimals.
  double utilization = 0;
  int64_t busy_ns = 0;
  // Sum over time of min(sum of "blocks per SM" of the kernels running, 1),
  // clipped to the steps, / (steps end - steps start). A fraction. Empty when
  // no kernel with positive "blocks per SM" runs within the steps.
  std::optional<double> sm_efficiency;
  // Duration-weighted mean of "est. achieved occupancy %" over the kernels'
  // parts within the steps, in the trace's own unit (percent; the page shows
  // it unscaled, 2 decimals). Empty when no such kernel time.
  std::optional<double> achieved_occupancy;
  // The Trace view's counters: GPU utilization per bucket of 10^k µs over
  // [global start, global end] ((bucket start ns, busy fraction), then
  // (end, 0)), and the SM-efficiency step function ((start, end, value)).
  std::vector<std::pair<int64_t, double>> util_timeline;
  struct ValueRange {
    int64_t start_ns, end_ns;
    double value;
  };
  std::vector<ValueRange> sm_efficiency_ranges;
  int64_t util_bucket_ns = 0;
};

struct TbGpuMetrics {
  int64_t steps_start_ns = 0, steps_end_ns = 0;  // first step's start, last kept step's end
  int64_t global_start_ns = 0, global_end_ns = 0;  // "PyTorch Profiler (0)" span, else all events
  std::vector<TbDeviceMetrics> devices;  // by device id
};

TbGpuMetrics tb_gpu_metrics(const Run& run);

// Both from one reading of the trace (the plugin's event parsing, most of
// the cost of each).
struct TbOverviewAndMetrics {
  TbOverview overview;
  TbGpuMetrics metrics;
};
TbOverviewAndMetrics tb_overview_and_metrics(const Run& run);

// One row of the Kernel view's table (kernel_parser.py KernelParser), over
// every kernel of the trace (in steps or not), sorted by total descending.
struct TbKernelStat {
  std::string name;
  bool tensor_cores = false;  // tensor_core.py TC_Allowlist: name contains a listed pattern
  int64_t calls = 0;
  int64_t total_ns = 0, max_ns = 0, min_ns = 0;
  double mean_ns = 0;
  // Duration-weighted means; a kernel without the arg counts as 0
  // (pandas fillna(0)); 0 when all its calls last 0.
  double blocks_per_sm = 0;
  double occupancy = 0;  // percent, as written in the trace
};
std::vector<TbKernelStat> tb_kernel_stats(const Run& run);

// Whether a kernel name uses Tensor Cores by the plugin's allowlist.
bool tb_tensor_core_kernel(const std::string& name);

// One row of the Operator view's table grouped by name (op_tree.py
// OpTreeBuilder._build_tree, node.py OperatorNode.fill_stats, op_agg.py
// aggregate_ops, run_generator.py _generate_op_table): per thread, ops nest
// by time; a runtime belongs to the first op with its External id; an op's
// device time is that of the kernels / memcpys / memsets its runtimes
// launched (self) plus its children's (total); its self host time excludes
// its children and its runtimes. Only plain operators are rows (not
// ProfilerStep#, DataLoader, Optimizer.*, user annotations,
// (Distributed)DataParallel.forward). Sorted by device self time, largest
// first (host self time for a trace without device work).
//
// Not reproduced: the plugin's regrouping of backward ops under modules,
// which needs python_function events' "Python module id" (absent from the
// model; without it the plugin skips the regrouping too), and has_call_stack
// ("Call stack" arg, absent from the model).
struct TbOpStat {
  std::string name;
  int64_t calls = 0;
  int64_t device_self_ns = 0, device_total_ns = 0;
  int64_t host_self_ns = 0, host_total_ns = 0;
  bool tc_eligible = false;        // tensor_core.py TC_OP_Allowlist, or launched a Tensor Core kernel
  double tc_self_ratio = 0;        // Tensor Core kernel time / device self time (fraction)
  double tc_total_ratio = 0;       // ... / device total time
};
std::vector<TbOpStat> tb_op_stats(const Run& run);

}  // namespace torchneck::gpu
