// A torch.profiler (Kineto) trace, as ingest reads it from a Chrome-trace
// JSON file: the complete events ("ph":"X") with the fields GPU analysis
// needs, the flow events that link them, and the trace's metadata. Plain std
// types: analyses (src/analyze/gpu/) are unit-tested on hand-built traces.
//
// Times are integer nanoseconds. Kineto writes microseconds (with up to
// three decimals in newer traces); read through a double, a timestamp of
// this century is within 125 ns of the text (the spacing of doubles near
// 1.7e15 us is 0.25 us); durations, being small, are exact.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace torchneck::kineto {

// Event categories, old capitalised names mapped to the current ones.
enum class Cat : uint8_t {
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
  kOther,              // anything else with "ph":"X"
};
const char* cat_name(Cat c);

struct Event {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  Cat cat = Cat::kOther;
  uint32_t name = 0;  // index into Trace::names
  int64_t pid = 0;    // numeric; GPU events: the device
  int64_t tid = 0;    // numeric; "stream 7" is 7
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

enum class FlowCat : uint8_t { kAc2g, kFwdBwd, kOther };  // "ac2g"/"async" (launch), "fwdbwd"

struct Flow {
  int64_t id = 0;
  bool start = true;  // "s" (true) or "f"
  FlowCat cat = FlowCat::kOther;
  int64_t ts_ns = 0;
  int64_t pid = 0;
  int64_t tid = 0;
};

struct Device {
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

// Device memory seen through the "[memory]" instant events (profile_memory
// = True): per device, the peak of "Total Allocated" / "Total Reserved"
// when the trace has them, else the peak of the running sum of "Bytes"
// (allocations minus frees since the trace started: a lower bound, the
// memory allocated before it is unknown).
struct MemoryUse {
  uint64_t events = 0;
  bool has_totals = false;
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  int64_t running = 0;  // running sum of Bytes
};

struct Trace {
  std::string path;
  std::vector<Event> events;  // sorted by ts_ns, then longer first
  std::vector<Flow> flows;
  std::vector<std::string> names;
  std::vector<Device> devices;  // from "deviceProperties"; may be empty
  int64_t rank = -1, world_size = -1;  // from "distributedInfo"
  std::string backend;
  std::map<int64_t, std::string> process_names;  // "process_name" metadata
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;  // (pid, tid) -> "thread_name" metadata
  std::map<int64_t, MemoryUse> device_memory;    // by device id, CUDA/ROCm devices only

  const std::string& name_of(const Event& e) const { return names[e.name]; }
};

inline bool is_gpu_work(Cat c) { return c == Cat::kKernel || c == Cat::kMemcpy || c == Cat::kMemset; }

}  // namespace torchneck::kineto
