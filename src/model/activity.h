// What a run did on its devices, and the host activity around it, as
// Kineto records it: CPU operators and annotations, runtime and driver calls,
// kernels, memcpy/memset, their correlation (runtime call <-> the device
// work it launched <-> the operator that issued it) and flows, the devices,
// their streams, the rank's identity and counters over time. Part of `Run`
// (model/run.h): ingest fills it from a torch.profiler trace; a live GPU
// window will fill it the same way; every GPU analysis reads it from the
// Run, never from a file format. Plain std types: analyses are unit-tested
// on hand-built activities.
//
// One table of activities in time order rather than one vector per kind:
// the definitions the GPU analyses reproduce (the TensorBoard plugin's, HTA's)
// walk host and device activity interleaved, nested by time, and a kind is
// one byte of each record.
//
// Times are integer nanoseconds on one clock per trace. Kineto writes
// microseconds (with up to three decimals in newer traces); read through a
// double, a timestamp of this century is within 125 ns of the text (the
// spacing of doubles near 1.7e15 us is 0.25 us); durations, being small,
// are exact.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace torchneck {

// Activity kinds; Kineto's old capitalised category names map to the
// current ones at ingest.
enum class ActivityKind : uint8_t {
  kCpuOp,              // "cpu_op", "Operator"
  kUserAnnotation,     // "user_annotation" (record_function, ProfilerStep#N in new traces)
  kGpuUserAnnotation,  // "gpu_user_annotation"
  kKernel,             // "kernel", "Kernel"
  kMemcpy,             // "gpu_memcpy", "Memcpy"
  kMemset,             // "gpu_memset", "Memset"
  kRuntime,            // "cuda_runtime", "Runtime"
  kDriver,             // "cuda_driver"
  kSync,               // "cuda_sync"
  kPythonFunction,     // "python_function"
  kTrace,              // "Trace" (the profiler's own span)
  kOther,              // anything else with a duration
};
// Kineto's current category name ("kernel", "cuda_runtime", ...).
const char* activity_kind_name(ActivityKind k);

inline bool is_gpu_work(ActivityKind k) {
  return k == ActivityKind::kKernel || k == ActivityKind::kMemcpy || k == ActivityKind::kMemset;
}

struct Activity {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  ActivityKind cat = ActivityKind::kOther;
  uint32_t name = 0;  // index into Activities::names
  int64_t pid = 0;    // numeric; device work: the device
  int64_t tid = 0;    // numeric; device work: the stream ("stream 7" is 7)
  int64_t device = -1;
  int64_t stream = -1;
  int64_t correlation = -1;  // runtime call <-> the device work it launched
  int64_t external_id = -1;  // device work / runtime call -> the cpu_op that issued it
  int64_t seq_nr = -1;       // "Sequence number" (autograd)
  int64_t fwd_tid = -1;      // "Fwd thread id" (backward ops)
  // Kernels.
  int32_t grid[3] = {0, 0, 0};
  int32_t block[3] = {0, 0, 0};
  int32_t registers_per_thread = -1;
  int64_t shared_memory = -1;
  double blocks_per_sm = -1;     // "blocks per SM"
  double warps_per_sm = -1;      // "warps per SM"
  double est_occupancy = -1;     // "est. achieved occupancy %"
  // Memcpy / memset.
  int64_t bytes = -1;

  int64_t end_ns() const { return ts_ns + dur_ns; }
};

enum class FlowKind : uint8_t { kAc2g, kFwdBwd, kOther };  // "ac2g"/"async" (launch), "fwdbwd"

// One end of a flow arrow between two activities.
struct ActivityFlow {
  int64_t id = 0;
  bool start = true;  // "s" (true) or "f"
  FlowKind cat = FlowKind::kOther;
  int64_t ts_ns = 0;
  int64_t pid = 0;
  int64_t tid = 0;
};

struct DeviceInfo {
  int64_t id = 0;
  std::string name;
  int64_t total_global_mem = 0;
  int64_t compute_major = 0, compute_minor = 0;
  int64_t max_threads_per_block = 0, max_threads_per_sm = 0;
  int64_t regs_per_block = 0, regs_per_sm = 0;
  int64_t warp_size = 0;
  int64_t shared_mem_per_block = 0, shared_mem_per_sm = 0;
  int64_t num_sms = 0;  // "numSms"
};

// One stream of one device, and the device work seen on it.
struct StreamInfo {
  int64_t device = -1;
  int64_t stream = -1;
  uint64_t kernels = 0, memcpys = 0, memsets = 0;
  int64_t busy_ns = 0;  // summed durations of its device work (overlaps within the stream counted twice)
};

// Device memory: per device, the peak of "Total Allocated" / "Total
// Reserved" when the source has them, else the peak of the running sum of
// allocations minus frees since recording started (a lower bound, the
// memory allocated before it is unknown).
struct DeviceMemoryUse {
  uint64_t events = 0;
  bool has_totals = false;
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  int64_t running = 0;  // running sum of Bytes
};

// A quantity sampled over time (device memory now; NVML utilisation, host
// memory later), one series per (name, device).
struct CounterSample {
  int64_t t_ns = 0;
  int64_t value = 0;
};
struct CounterSeries {
  std::string name;  // "device memory allocated (bytes)"
  int64_t device = -1;
  std::vector<CounterSample> samples;  // in the order recorded
};

// Who this run is in a distributed job; -1 when not distributed or unknown.
struct RankInfo {
  int64_t rank = -1;
  int64_t world_size = -1;
  std::string backend;  // "nccl", "gloo"
  // A live run under a launcher (torchrun, torch.multiprocessing.spawn):
  int64_t local_rank = -1;
  std::string host;  // the machine it ran on: ranks of one host share one monotonic clock
  // What identifies the job, the same in every rank of it (torchrun's run
  // id, the rendezvous address, the world size): a rank folder of another
  // job is refused. "" when unknown.
  std::string job;
};

struct Activities {
  std::string source;  // the file they were read from; "" for a live run
  std::vector<Activity> events;  // sorted by ts_ns, then longer first
  std::vector<ActivityFlow> flows;
  std::vector<std::string> names;
  std::vector<DeviceInfo> devices;  // may be empty (the source had no device properties)
  std::vector<StreamInfo> streams;  // by device, then stream
  std::map<int64_t, std::string> process_names;  // pid -> name
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;  // (pid, tid) -> name
  std::map<int64_t, DeviceMemoryUse> device_memory;  // by device id, CUDA/ROCm devices only
  std::vector<CounterSeries> counters;

  const std::string& name_of(const Activity& e) const { return names[e.name]; }
  bool empty() const { return events.empty(); }
};

// The streams of `a` from its device work (fills a.streams).
void index_streams(Activities& a);

}  // namespace torchneck
