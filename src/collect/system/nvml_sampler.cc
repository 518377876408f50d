#include "collect/system/nvml_sampler.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "collect/system/thinned_series.h"
#include "collect/system/lock_within.h"
#include "core/clock.h"

namespace torchneck {
namespace {

// The part of nvml.h this file uses, with its ABI (the driver's
// libnvidia-ml.so.1 exports these C functions; an enum is an int).
namespace nvml {
using Return = int;  // nvmlReturn_t
constexpr Return kSuccess = 0;
constexpr Return kGpuIsLost = 15;  // NVML_ERROR_GPU_IS_LOST: fallen off the bus, every later call fails
struct DeviceSt;
using Device = DeviceSt*;  // nvmlDevice_t
struct Utilization {       // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
struct Memory {  // nvmlMemory_t (v1)
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr int kClockSm = 1;              // NVML_CLOCK_SM (nvmlClockType_t)
constexpr unsigned kNameBuffer = 96;     // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBuffer = 96;     // NVML_DEVICE_UUID_V2_BUFFER_SIZE
}  // namespace nvml

struct Api {
  void* lib = nullptr;
  nvml::Return (*init)() = nullptr;  // nvmlInit_v2
  nvml::Return (*shutdown)() = nullptr;
  nvml::Return (*count)(unsigned int*) = nullptr;                      // nvmlDeviceGetCount_v2
  nvml::Return (*by_index)(unsigned int, nvml::Device*) = nullptr;     // nvmlDeviceGetHandleByIndex_v2
  nvml::Return (*name)(nvml::Device, char*, unsigned int) = nullptr;   // nvmlDeviceGetName
  nvml::Return (*uuid)(nvml::Device, char*, unsigned int) = nullptr;   // nvmlDeviceGetUUID
  nvml::Return (*utilization)(nvml::Device, nvml::Utilization*) = nullptr;
  nvml::Return (*memory)(nvml::Device, nvml::Memory*) = nullptr;
  nvml::Return (*clock)(nvml::Device, int, unsigned int*) = nullptr;  // nvmlDeviceGetClockInfo
  nvml::Return (*power)(nvml::Device, unsigned int*) = nullptr;       // nvmlDeviceGetPowerUsage, mW
  const char* (*error_string)(nvml::Return) = nullptr;                // optional
};

std::string nvml_error(const Api& api, nvml::Return r) {
  const char* s = api.error_string != nullptr ? api.error_string(r) : nullptr;
  return std::string(s != nullptr ? s : "error") + " (" + std::to_string(r) + ")";
}

// Binds every function; returns the first one missing, or nullptr.
const char* bind(Api& api) {
  struct Entry {
    const char* symbol;
    void** slot;
  };
  const Entry entries[] = {
      {"nvmlInit_v2", reinterpret_cast<void**>(&api.init)},
      {"nvmlShutdown", reinterpret_cast<void**>(&api.shutdown)},
      {"nvmlDeviceGetCount_v2", reinterpret_cast<void**>(&api.count)},
      {"nvmlDeviceGetHandleByIndex_v2", reinterpret_cast<void**>(&api.by_index)},
      {"nvmlDeviceGetName", reinterpret_cast<void**>(&api.name)},
      {"nvmlDeviceGetUUID", reinterpret_cast<void**>(&api.uuid)},
      {"nvmlDeviceGetUtilizationRates", reinterpret_cast<void**>(&api.utilization)},
      {"nvmlDeviceGetMemoryInfo", reinterpret_cast<void**>(&api.memory)},
      {"nvmlDeviceGetClockInfo", reinterpret_cast<void**>(&api.clock)},
      {"nvmlDeviceGetPowerUsage", reinterpret_cast<void**>(&api.power)},
  };
  for (const Entry& e : entries) {
    *e.slot = dlsym(api.lib, e.symbol);
    if (*e.slot == nullptr) return e.symbol;
  }
  api.error_string = reinterpret_cast<const char* (*)(nvml::Return)>(dlsym(api.lib, "nvmlErrorString"));
  return nullptr;
}

struct DeviceState {
  DeviceState(nvml::Device h, size_t capacity) : handle(h), series(capacity) {}
  nvml::Device handle;
  ThinnedSeries<NvmlSample> series;  // under NvmlState::mu
};

struct NvmlState {
  NvmlSamplerOptions options;
  Api api;
  std::mutex mu;  // devices' lost_t_ns, the series, the flags
  std::condition_variable wake;
  std::condition_variable done;
  bool stopping = false;
  bool finished = false;  // the thread has left its loop
  bool stuck = false;     // stop() gave up waiting for it
  std::vector<NvmlDevice> devices;
  std::vector<DeviceState> state;  // beside devices
  std::thread thread;
  pid_t owner_pid = 0;
  int64_t first_t_ns = 0;
};

NvmlState* g_state = nullptr;  // the session's calls come one at a time (GIL)

// One device now: -1 for each field whose call failed; *lost when NVML says
// the GPU is gone.
NvmlSample sample_device(const Api& api, nvml::Device h, uint32_t device, bool* lost) {
  NvmlSample s;
  s.t_ns = now_ns();
  s.device = device;
  nvml::Return r;
  nvml::Utilization u{};
  if ((r = api.utilization(h, &u)) == nvml::kSuccess) {
    s.gpu_util_pct = static_cast<int32_t>(u.gpu);
    s.mem_util_pct = static_cast<int32_t>(u.memory);
  }
  *lost = r == nvml::kGpuIsLost;
  nvml::Memory m{};
  if (!*lost && (r = api.memory(h, &m)) == nvml::kSuccess) s.mem_used_bytes = static_cast<int64_t>(m.used);
  *lost = *lost || r == nvml::kGpuIsLost;
  unsigned int v = 0;
  if (!*lost && (r = api.clock(h, nvml::kClockSm, &v)) == nvml::kSuccess) s.sm_clock_mhz = static_cast<int32_t>(v);
  *lost = *lost || r == nvml::kGpuIsLost;
  if (!*lost && (r = api.power(h, &v)) == nvml::kSuccess) s.power_mw = static_cast<int64_t>(v);
  *lost = *lost || r == nvml::kGpuIsLost;
  return s;
}

// Every device still there, the calls made without the lock; the samples
// kept under it. `keep` is ThinnedSeries::tick or ::add.
template <typename Keep>
void sample_all(NvmlState* st, Keep keep) {
  NvmlSample taken[kNvmlMaxDevices];
  bool lost[kNvmlMaxDevices] = {};
  bool skip[kNvmlMaxDevices] = {};
  const size_t n = st->state.size();
  {
    std::lock_guard<std::mutex> lock(st->mu);
    for (size_t i = 0; i < n; ++i) skip[i] = st->devices[i].lost_t_ns >= 0;
  }
  for (size_t i = 0; i < n; ++i)
    if (!skip[i]) taken[i] = sample_device(st->api, st->state[i].handle, static_cast<uint32_t>(i), &lost[i]);
  std::lock_guard<std::mutex> lock(st->mu);
  for (size_t i = 0; i < n; ++i) {
    if (skip[i]) continue;
    if (lost[i]) st->devices[i].lost_t_ns = taken[i].t_ns;  // its samples so far stay
    else keep(st->state[i].series, taken[i]);
  }
}

void tick(ThinnedSeries<NvmlSample>& s, const NvmlSample& x) { s.tick(x); }
void add(ThinnedSeries<NvmlSample>& s, const NvmlSample& x) { s.add(x); }

void sampler_main(NvmlState* st) {
  // Deadlines on the base interval, so that a late wake-up does not shift
  // every later sample.
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    next += std::chrono::nanoseconds(st->options.interval_ns);
    {
      std::unique_lock<std::mutex> lock(st->mu);
      if (st->wake.wait_until(lock, next, [st] { return st->stopping; })) break;
    }
    sample_all(st, tick);
  }
  // The last sample, at the end of the run, here rather than in stop(): a
  // call that hangs then is covered by stop's bounded wait too.
  sample_all(st, add);
  std::lock_guard<std::mutex> lock(st->mu);
  st->finished = true;
  st->done.notify_all();
}

// CUDA_VISIBLE_DEVICES's entries: an index, or a UUID ("GPU-...", a unique
// prefix is enough) as CUDA takes them; CUDA ignores the entries from the
// first one it cannot resolve on, and so does this.
std::vector<unsigned int> visible_devices(const Api& api, unsigned int count, const char* visible) {
  std::vector<unsigned int> out;
  if (visible == nullptr) {
    for (unsigned int i = 0; i < count && out.size() < kNvmlMaxDevices; ++i) out.push_back(i);
    return out;
  }
  std::vector<std::string> uuids(count);
  for (unsigned int i = 0; i < count; ++i) {
    nvml::Device h = nullptr;
    char buf[nvml::kUuidBuffer] = {};
    if (api.by_index(i, &h) == nvml::kSuccess && api.uuid(h, buf, sizeof buf) == nvml::kSuccess) uuids[i] = buf;
  }
  const std::string list = visible;
  size_t pos = 0;
  while (pos <= list.size() && out.size() < kNvmlMaxDevices) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    std::string entry = list.substr(pos, comma - pos);
    entry.erase(0, entry.find_first_not_of(" \t"));
    entry.erase(entry.find_last_not_of(" \t") + 1);
    pos = comma + 1;
    long found = -1;
    if (!entry.empty() && entry.find_first_not_of("0123456789") == std::string::npos) {
      const long i = std::strtol(entry.c_str(), nullptr, 10);
      if (i < static_cast<long>(count)) found = i;
    } else if (entry.rfind("GPU-", 0) == 0) {
      for (unsigned int i = 0; i < count; ++i) {
        if (uuids[i].rfind(entry, 0) != 0) continue;
        if (found >= 0) {  // an ambiguous prefix
          found = -1;
          break;
        }
        found = i;
      }
    }
    if (found < 0 || std::find(out.begin(), out.end(), static_cast<unsigned int>(found)) != out.end()) break;
    out.push_back(static_cast<unsigned int>(found));
  }
  return out;
}

void unload(Api& api, bool initialised) {
  if (initialised) api.shutdown();
  if (api.lib != nullptr) dlclose(api.lib);
  api.lib = nullptr;
}

// Stops the thread, waiting at most options.stop_wait_ns; true when it ended.
bool end_thread(NvmlState* st) {
  if (!st->thread.joinable()) return true;
  std::unique_lock<std::mutex> lock(st->mu);
  st->stopping = true;
  st->wake.notify_all();
  if (!st->done.wait_for(lock, std::chrono::nanoseconds(st->options.stop_wait_ns), [st] { return st->finished; })) {
    // Stuck inside an NVML call: it is left behind, with the library
    // loaded and this state alive, rather than hang the end of the run.
    st->stuck = true;
    lock.unlock();
    st->thread.detach();
    return false;
  }
  lock.unlock();
  st->thread.join();
  return true;
}

void copy_out(const NvmlState* st, Run& run) {
  run.nvml_devices = st->devices;
  run.nvml.clear();
  int64_t stride = 1;
  size_t total = 0;
  for (const DeviceState& d : st->state) total += d.series.samples().size();
  run.nvml.reserve(total);
  for (const DeviceState& d : st->state) {
    run.nvml.insert(run.nvml.end(), d.series.samples().begin(), d.series.samples().end());
    stride = std::max(stride, d.series.stride());
  }
  std::stable_sort(run.nvml.begin(), run.nvml.end(), [](const NvmlSample& a, const NvmlSample& b) {
    return a.t_ns != b.t_ns ? a.t_ns < b.t_ns : a.device < b.device;
  });
  run.nvml_interval_ns = st->options.interval_ns * stride;
  for (size_t i = 0; i < st->devices.size(); ++i) {
    const NvmlDevice& d = st->devices[i];
    if (d.lost_t_ns < 0) continue;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "NVML: GPU %zu (%s) disappeared %.2f s into the run (NVML_ERROR_GPU_IS_LOST); its samples end there",
                  i, d.name.c_str(), ns_to_s(d.lost_t_ns - st->first_t_ns));
    run.notes.push_back(buf);
  }
  if (st->stuck) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "NVML: a call did not return within %.1f s at the end of the run; the GPU samples end at the "
                  "last one taken",
                  ns_to_s(st->options.stop_wait_ns));
    run.notes.push_back(buf);
  }
}

}  // namespace

NvmlStart start_nvml_sampler(const NvmlSamplerOptions& options, std::string* error) {
  if (g_state != nullptr) {
    *error = "NVML sampler: already running";
    return NvmlStart::kFailed;
  }
  if (options.interval_ns <= 0) return NvmlStart::kAbsent;
  const char* env = std::getenv("TORCHNECK_NVML_LIBRARY");
  const bool named = !options.library.empty() || (env != nullptr && env[0] != '\0');
  const std::string path = !options.library.empty() ? options.library : named ? env : options.default_library;
  Api api;
  api.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api.lib == nullptr) {
    if (!named) return NvmlStart::kAbsent;  // no NVIDIA driver on this machine: nothing to say
    const char* why = dlerror();
    *error = "NVML: cannot load " + path + " (TORCHNECK_NVML_LIBRARY): " + (why != nullptr ? why : "dlopen failed") +
             "; no GPU samples over the run";
    return NvmlStart::kFailed;
  }
  if (const char* missing = bind(api)) {
    *error = "NVML: " + path + " has no " + missing + " (a driver older than NVML 5.319); no GPU samples over the run";
    unload(api, false);
    return NvmlStart::kFailed;
  }
  nvml::Return r = api.init();
  if (r != nvml::kSuccess) {
    *error = "NVML: nvmlInit_v2 failed: " + nvml_error(api, r) + "; no GPU samples over the run";
    unload(api, false);
    return NvmlStart::kFailed;
  }
  unsigned int count = 0;
  if ((r = api.count(&count)) != nvml::kSuccess) {
    *error = "NVML: nvmlDeviceGetCount_v2 failed: " + nvml_error(api, r) + "; no GPU samples over the run";
    unload(api, true);
    return NvmlStart::kFailed;
  }
  auto* st = new NvmlState;
  st->options = options;
  st->options.capacity = std::max<size_t>(2, options.capacity);
  st->api = api;
  for (unsigned int index : visible_devices(api, count, std::getenv("CUDA_VISIBLE_DEVICES"))) {
    nvml::Device h = nullptr;
    if (api.by_index(index, &h) != nvml::kSuccess) continue;
    NvmlDevice d;
    d.nvml_index = static_cast<int32_t>(index);
    char buf[std::max(nvml::kNameBuffer, nvml::kUuidBuffer)] = {};
    if (api.name(h, buf, nvml::kNameBuffer) == nvml::kSuccess) d.name = buf;
    buf[0] = '\0';
    if (api.uuid(h, buf, nvml::kUuidBuffer) == nvml::kSuccess) d.uuid = buf;
    nvml::Memory m{};
    if (api.memory(h, &m) == nvml::kSuccess) d.mem_total_bytes = static_cast<int64_t>(m.total);
    st->devices.push_back(std::move(d));
    st->state.emplace_back(h, st->options.capacity);
  }
  if (st->devices.empty()) {  // CUDA_VISIBLE_DEVICES="" or no GPU: nothing to sample
    unload(st->api, true);
    delete st;
    return NvmlStart::kAbsent;
  }
  st->first_t_ns = now_ns();
  sample_all(st, tick);
  st->owner_pid = ::getpid();
  st->thread = std::thread(sampler_main, st);
  g_state = st;
  return NvmlStart::kStarted;
}

void stop_nvml_sampler() {
  NvmlState* st = g_state;
  if (st == nullptr || !st->thread.joinable()) return;
  end_thread(st);  // the thread takes the last sample
}

bool snapshot_nvml_sampler(Run& run, int64_t wait_ns) {
  NvmlState* st = g_state;
  if (st == nullptr) return true;
  std::unique_lock<std::mutex> lock(st->mu, std::defer_lock);
  if (!lock_within(lock, wait_ns)) return false;
  copy_out(st, run);
  return true;
}

void collect_nvml_sampler(Run& run) {
  NvmlState* st = g_state;
  if (st == nullptr) return;
  g_state = nullptr;
  std::unique_lock<std::mutex> lock(st->mu);
  copy_out(st, run);
  if (st->stuck) return;  // the thread left behind still holds st and the library
  lock.unlock();
  unload(st->api, true);
  delete st;
}

void discard_nvml_sampler() {
  NvmlState* st = g_state;
  if (st == nullptr) return;
  g_state = nullptr;
  // In a forked child the thread, perhaps a held lock and the NVML session
  // are the parent's: the state is leaked (the thread can be neither joined
  // nor detached here, and NVML must not be shut down under the parent).
  if (st->owner_pid != ::getpid() || !end_thread(st)) return;  // or left behind, stuck, with st
  unload(st->api, true);
  delete st;
}

}  // namespace torchneck
