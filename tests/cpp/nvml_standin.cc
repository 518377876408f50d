// A stand-in for libnvidia-ml.so.1, for the tests of the NVML sampler on
// machines without a GPU: the sampler loads it through its own dlopen path
// (TORCHNECK_NVML_LIBRARY=<this library>) and gets the readings a script
// sets, the failures included. Only the functions the sampler calls, with
// nvml.h's ABI.
//
// The script is the file TORCHNECK_NVML_STANDIN_SCRIPT names, read by
// nvmlInit_v2; one directive a line, '#' starts a comment:
//
//   init R                     nvmlInit_v2 returns R (9: NVML_ERROR_DRIVER_NOT_LOADED); default 0
//   device NAME UUID TOTAL     a GPU (in index order); '_' in NAME reads as a space
//   values D GPU MEM USED SM POWER
//                              the readings of device D's next sample: the k-th values line
//                              of D is its sample k; the last one repeats
//   fail D CALL K              CALL (utilization, memory, clock, power) on device D returns
//                              NVML_ERROR_UNKNOWN (999) in sample K
//   lost D K                   from sample K on, every call on device D returns
//                              NVML_ERROR_GPU_IS_LOST (15)
//   hang D K MS                device D's utilization call of sample K sleeps MS ms first
//
// Sample K of a device is the one its K-th nvmlDeviceGetUtilizationRates
// call (from 0) begins: the sampler reads utilization first, then memory,
// clock and power. Calls before a device's first sample read sample 0's
// values. A missing script is an empty one: no device.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace {

typedef int nvmlReturn_t;
enum { kSuccess = 0, kInvalidArgument = 2, kUninitialized = 1, kGpuIsLost = 15, kUnknown = 999 };
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

#define MAX_DEVICES 32
#define MAX_VALUES 64
#define MAX_RULES 64

enum Call { kUtilization, kMemory, kClock, kPower, kCalls };
static const char* const kCallNames[kCalls] = {"utilization", "memory", "clock", "power"};

typedef struct {
  long long gpu, mem, used, sm, power;
} Values;

typedef struct {
  char name[96];
  char uuid[96];
  unsigned long long total;
  Values values[MAX_VALUES];
  int n_values;
  long long lost_at;          /* -1: never */
  long long hang_at, hang_ms; /* -1: never */
  std::atomic<long long> samples;       /* utilization calls so far */
} Device;

typedef struct {
  int device, call;
  long long sample;
} Rule;

static Device g_devices[MAX_DEVICES];
static int g_count;
static Rule g_fails[MAX_RULES];
static int g_n_fails;
static int g_init_return;
std::atomic<int> g_initialised{0};

static void load_script(void) {
  for (Device& d : g_devices) {
    d.name[0] = d.uuid[0] = '\0';
    d.total = 0;
    d.n_values = 0;
    d.lost_at = d.hang_at = -1;
    d.hang_ms = 0;
    d.samples.store(0);
  }
  g_count = 0;
  g_n_fails = 0;
  g_init_return = 0;
  const char* path = getenv("TORCHNECK_NVML_STANDIN_SCRIPT");
  FILE* f = path != NULL ? fopen(path, "r") : NULL;
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof line, f) != NULL) {
    char* hash = strchr(line, '#');
    if (hash != NULL) *hash = '\0';
    char word[32] = "";
    if (sscanf(line, "%31s", word) != 1) continue;
    if (strcmp(word, "init") == 0) {
      sscanf(line, "%*s %d", &g_init_return);
    } else if (strcmp(word, "device") == 0 && g_count < MAX_DEVICES) {
      Device* d = &g_devices[g_count];
      if (sscanf(line, "%*s %95s %95s %llu", d->name, d->uuid, &d->total) != 3) continue;
      for (char* p = d->name; *p; ++p)
        if (*p == '_') *p = ' ';
      d->lost_at = -1;
      d->hang_at = -1;
      ++g_count;
    } else if (strcmp(word, "values") == 0) {
      int i;
      Values v;
      if (sscanf(line, "%*s %d %lld %lld %lld %lld %lld", &i, &v.gpu, &v.mem, &v.used, &v.sm, &v.power) != 6) continue;
      if (i < 0 || i >= g_count || g_devices[i].n_values >= MAX_VALUES) continue;
      g_devices[i].values[g_devices[i].n_values++] = v;
    } else if (strcmp(word, "fail") == 0 && g_n_fails < MAX_RULES) {
      Rule r;
      char call[32];
      if (sscanf(line, "%*s %d %31s %lld", &r.device, call, &r.sample) != 3) continue;
      r.call = -1;
      for (int c = 0; c < kCalls; ++c)
        if (strcmp(call, kCallNames[c]) == 0) r.call = c;
      if (r.call >= 0) g_fails[g_n_fails++] = r;
    } else if (strcmp(word, "lost") == 0) {
      int i;
      long long k;
      if (sscanf(line, "%*s %d %lld", &i, &k) == 2 && i >= 0 && i < g_count) g_devices[i].lost_at = k;
    } else if (strcmp(word, "hang") == 0) {
      int i;
      long long k, ms;
      if (sscanf(line, "%*s %d %lld %lld", &i, &k, &ms) == 3 && i >= 0 && i < g_count) {
        g_devices[i].hang_at = k;
        g_devices[i].hang_ms = ms;
      }
    }
  }
  fclose(f);
}

/* The device behind a handle, its sample number for this call, and the
 * call's scripted failure: kSuccess when it reads its values. */
static nvmlReturn_t begin(void* handle, enum Call call, const Values** v) {
  if (!g_initialised.load()) return kUninitialized;
  Device* d = static_cast<Device*>(handle);
  if (d < g_devices || d >= g_devices + g_count) return kInvalidArgument;
  long long k = call == kUtilization ? d->samples.fetch_add(1) : d->samples.load() - 1;
  if (call == kUtilization && k == d->hang_at) {
    struct timespec ts = {static_cast<time_t>(d->hang_ms / 1000), static_cast<long>((d->hang_ms % 1000) * 1000000)};
    nanosleep(&ts, NULL);
  }
  if (d->lost_at >= 0 && k >= d->lost_at) return kGpuIsLost;
  for (int i = 0; i < g_n_fails; ++i)
    if (g_fails[i].device == d - g_devices && g_fails[i].call == static_cast<int>(call) && g_fails[i].sample == k) return kUnknown;
  if (k < 0) k = 0;
  static const Values kNone = {0, 0, 0, 0, 0};
  *v = d->n_values == 0 ? &kNone : &d->values[k < d->n_values ? k : d->n_values - 1];
  return kSuccess;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2(void) {
  load_script();
  if (g_init_return != kSuccess) return g_init_return;
  g_initialised.store(1);
  return kSuccess;
}

nvmlReturn_t nvmlShutdown(void) {
  g_initialised.store(0);
  return kSuccess;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case 0: return "Success";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    case 999: return "Unknown Error";
    default: return "Stand-in Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!g_initialised.load()) return kUninitialized;
  *count = static_cast<unsigned int>(g_count);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (!g_initialised.load()) return kUninitialized;
  if (index >= static_cast<unsigned int>(g_count)) return kInvalidArgument;
  *device = &g_devices[index];
  return kSuccess;
}

static nvmlReturn_t copy_string(void* handle, int uuid, char* out, unsigned int length) {
  if (!g_initialised.load()) return kUninitialized;
  Device* d = static_cast<Device*>(handle);
  if (d < g_devices || d >= g_devices + g_count) return kInvalidArgument;
  snprintf(out, length, "%s", uuid ? d->uuid : d->name);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  return copy_string(device, 0, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  return copy_string(device, 1, uuid, length);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(void* device, nvmlUtilization_t* u) {
  const Values* v = NULL;
  const nvmlReturn_t r = begin(device, kUtilization, &v);
  if (r != kSuccess) return r;
  u->gpu = static_cast<unsigned int>(v->gpu);
  u->memory = static_cast<unsigned int>(v->mem);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(void* device, nvmlMemory_t* m) {
  const Values* v = NULL;
  const nvmlReturn_t r = begin(device, kMemory, &v);
  if (r != kSuccess) return r;
  const Device* d = static_cast<const Device*>(device);
  m->total = d->total;
  m->used = static_cast<unsigned long long>(v->used);
  m->free = d->total > m->used ? d->total - m->used : 0;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetClockInfo(void* device, int type, unsigned int* clock) {
  const Values* v = NULL;
  if (type != 1) return kInvalidArgument; /* NVML_CLOCK_SM: the only one the sampler reads */
  const nvmlReturn_t r = begin(device, kClock, &v);
  if (r != kSuccess) return r;
  *clock = static_cast<unsigned int>(v->sm);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(void* device, unsigned int* power) {
  const Values* v = NULL;
  const nvmlReturn_t r = begin(device, kPower, &v);
  if (r != kSuccess) return r;
  *power = static_cast<unsigned int>(v->power);
  return kSuccess;
}

}  // extern "C"
