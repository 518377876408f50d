// The NVML sampler against the stand-in library (tests/cpp/nvml_standin.cc),
// loaded through the sampler's own dlopen path (TORCHNECK_NVML_LIBRARY):
// every test writes the stand-in's script, so the readings, the failing
// calls and the lost GPU are known, and compares the samples with it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "collect/system/nvml_sampler.h"
#include "core/clock.h"

namespace torchneck {
namespace {

constexpr int64_t kMs = 1'000'000;

// The stand-in, scripted; CUDA_VISIBLE_DEVICES as `visible` (nullptr: unset).
class NvmlScript {
 public:
  explicit NvmlScript(const std::string& script, const char* visible = nullptr) {
    path_ = ::testing::TempDir() + "nvml_script_" + std::to_string(::getpid()) + ".txt";
    std::ofstream(path_) << script;
    ::setenv("TORCHNECK_NVML_STANDIN_SCRIPT", path_.c_str(), 1);
    ::setenv("TORCHNECK_NVML_LIBRARY", TORCHNECK_NVML_STANDIN, 1);
    if (visible != nullptr) ::setenv("CUDA_VISIBLE_DEVICES", visible, 1);
    else ::unsetenv("CUDA_VISIBLE_DEVICES");
  }
  ~NvmlScript() {
    ::unsetenv("TORCHNECK_NVML_STANDIN_SCRIPT");
    ::unsetenv("TORCHNECK_NVML_LIBRARY");
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    std::remove(path_.c_str());
  }

 private:
  std::string path_;
};

NvmlSamplerOptions every_ms(int64_t ms) {
  NvmlSamplerOptions o;
  o.interval_ns = ms * kMs;
  return o;
}

// Starts, lets it sample for `ms`, stops and collects.
torchneck::Run sample_for(const NvmlSamplerOptions& o, int ms) {
  std::string error;
  const NvmlStart started = start_nvml_sampler(o, &error);
  EXPECT_EQ(started, NvmlStart::kStarted) << error;
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  stop_nvml_sampler();
  torchneck::Run run;
  collect_nvml_sampler(run);
  return run;
}

std::vector<NvmlSample> of_device(const torchneck::Run& run, uint32_t d) {
  std::vector<NvmlSample> out;
  for (const NvmlSample& s : run.nvml)
    if (s.device == d) out.push_back(s);
  return out;
}

const char* const kTwoGpus =
    "device NVIDIA_H200 GPU-aaaa-1111 150000000000\n"
    "device NVIDIA_H100 GPU-bbbb-2222 80000000000\n"
    "values 0 10 5 1000 1980 100000\n"
    "values 0 20 6 2000 1970 200000\n"
    "values 0 30 7 3000 1500 300000\n"
    "values 1 90 50 70000 1410 650000\n";

TEST(NvmlSampler, SamplesMatchTheScriptAndAFailingCallIsMinusOne) {
  // GIVEN two GPUs whose readings change over the first three samples, and
  // GPU 0's power call failing in its sample 1
  NvmlScript script(std::string(kTwoGpus) + "fail 0 power 1\nfail 1 clock 0\n");
  const int64_t t0 = now_ns();
  // WHEN the sampler runs every 5 ms for 80 ms
  const torchneck::Run run = sample_for(every_ms(5), 80);
  const int64_t t1 = now_ns();
  // THEN both devices are named as the script names them
  ASSERT_EQ(run.nvml_devices.size(), 2u);
  EXPECT_EQ(run.nvml_devices[0].name, "NVIDIA H200");
  EXPECT_EQ(run.nvml_devices[0].uuid, "GPU-aaaa-1111");
  EXPECT_EQ(run.nvml_devices[0].mem_total_bytes, 150'000'000'000);
  EXPECT_EQ(run.nvml_devices[1].nvml_index, 1);
  EXPECT_EQ(run.nvml_devices[1].lost_t_ns, -1);
  EXPECT_EQ(run.nvml_interval_ns, 5 * kMs);
  EXPECT_TRUE(run.notes.empty());
  // AND sample k of GPU 0 has the script's k-th readings (the last repeats),
  // power -1 in sample 1 only
  const auto g0 = of_device(run, 0);
  ASSERT_GE(g0.size(), 4u);
  const int64_t gpu[] = {10, 20, 30}, used[] = {1000, 2000, 3000}, sm[] = {1980, 1970, 1500}, mw[] = {100000, -1, 300000};
  for (size_t k = 0; k < g0.size(); ++k) {
    const size_t v = std::min<size_t>(k, 2);
    EXPECT_EQ(g0[k].gpu_util_pct, gpu[v]) << k;
    EXPECT_EQ(g0[k].mem_util_pct, 5 + static_cast<int64_t>(v)) << k;
    EXPECT_EQ(g0[k].mem_used_bytes, used[v]) << k;
    EXPECT_EQ(g0[k].sm_clock_mhz, sm[v]) << k;
    EXPECT_EQ(g0[k].power_mw, mw[v]) << k;
    EXPECT_GE(g0[k].t_ns, t0);
    EXPECT_LE(g0[k].t_ns, t1);
    if (k > 0) {
      EXPECT_GT(g0[k].t_ns, g0[k - 1].t_ns);
    }
  }
  // AND GPU 1 has its one reading throughout, its SM clock -1 in sample 0
  const auto g1 = of_device(run, 1);
  ASSERT_EQ(g1.size(), g0.size());
  EXPECT_EQ(g1[0].sm_clock_mhz, -1);
  EXPECT_EQ(g1[0].gpu_util_pct, 90);
  for (size_t k = 1; k < g1.size(); ++k) EXPECT_EQ(g1[k].sm_clock_mhz, 1410) << k;
  // AND the samples are by time, the devices of one instant in order
  for (size_t i = 1; i < run.nvml.size(); ++i) EXPECT_LE(run.nvml[i - 1].t_ns, run.nvml[i].t_ns);
}

TEST(NvmlSampler, ALostGpuStopsThereWithANoteAndTheOtherGoesOn) {
  // GIVEN GPU 1 falling off the bus at its sample 3
  NvmlScript script(std::string(kTwoGpus) + "lost 1 3\n");
  // WHEN the sampler runs every 5 ms for 80 ms
  const torchneck::Run run = sample_for(every_ms(5), 80);
  // THEN GPU 1 keeps its three samples and its loss time, after them
  const auto g1 = of_device(run, 1);
  ASSERT_EQ(g1.size(), 3u);
  ASSERT_EQ(run.nvml_devices.size(), 2u);
  EXPECT_GT(run.nvml_devices[1].lost_t_ns, g1.back().t_ns);
  EXPECT_EQ(run.nvml_devices[0].lost_t_ns, -1);
  // AND GPU 0 was sampled on
  EXPECT_GT(of_device(run, 0).size(), 5u);
  // AND one note says which GPU disappeared
  ASSERT_EQ(run.notes.size(), 1u);
  EXPECT_NE(run.notes[0].find("GPU 1 (NVIDIA H100) disappeared"), std::string::npos) << run.notes[0];
}

TEST(NvmlSampler, NoDriverIsAOneLineError) {
  // GIVEN nvmlInit_v2 failing with NVML_ERROR_DRIVER_NOT_LOADED
  NvmlScript script(std::string("init 9\n") + kTwoGpus);
  // WHEN the sampler starts
  std::string error;
  // THEN it fails, saying why in one line
  EXPECT_EQ(start_nvml_sampler(every_ms(5), &error), NvmlStart::kFailed);
  EXPECT_NE(error.find("nvmlInit_v2 failed: Driver Not Loaded (9)"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  torchneck::Run run;
  collect_nvml_sampler(run);
  EXPECT_TRUE(run.nvml_devices.empty());
}

TEST(NvmlSampler, NoLibraryIsAbsentAndSaysNothing) {
  // GIVEN no TORCHNECK_NVML_LIBRARY, and a default library not on this machine
  ::unsetenv("TORCHNECK_NVML_LIBRARY");
  NvmlSamplerOptions o = every_ms(5);
  o.default_library = "libtorchneck-no-such-nvml.so.1";
  // WHEN the sampler starts
  std::string error;
  // THEN it is absent, with nothing to say
  EXPECT_EQ(start_nvml_sampler(o, &error), NvmlStart::kAbsent);
  EXPECT_TRUE(error.empty()) << error;
  // AND a library named by the variable that is not there is a failure that says so
  ::setenv("TORCHNECK_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  EXPECT_EQ(start_nvml_sampler(o, &error), NvmlStart::kFailed);
  EXPECT_NE(error.find("cannot load /nonexistent/libnvidia-ml.so.1 (TORCHNECK_NVML_LIBRARY)"), std::string::npos)
      << error;
  ::unsetenv("TORCHNECK_NVML_LIBRARY");
}

TEST(NvmlSampler, CudaVisibleDevicesPicksAndOrdersTheGpus) {
  const std::string three =
      "device A GPU-aaaa-1111 1\ndevice B GPU-bbbb-2222 2\ndevice C GPU-cccc-3333 3\n";
  std::string error;
  {
    // GIVEN CUDA_VISIBLE_DEVICES naming GPU 2 by index, then GPU 0 by a UUID prefix
    NvmlScript script(three, "2,GPU-aaaa");
    // THEN those two are sampled, in that order
    const torchneck::Run run = sample_for(every_ms(5), 20);
    ASSERT_EQ(run.nvml_devices.size(), 2u);
    EXPECT_EQ(run.nvml_devices[0].name, "C");
    EXPECT_EQ(run.nvml_devices[0].nvml_index, 2);
    EXPECT_EQ(run.nvml_devices[1].name, "A");
  }
  {
    // GIVEN an entry that names no GPU: CUDA ignores it and every later one
    NvmlScript script(three, "1,7,0");
    const torchneck::Run run = sample_for(every_ms(5), 20);
    ASSERT_EQ(run.nvml_devices.size(), 1u);
    EXPECT_EQ(run.nvml_devices[0].name, "B");
  }
  {
    // GIVEN CUDA_VISIBLE_DEVICES="": no GPU, nothing to sample or say
    NvmlScript script(three, "");
    EXPECT_EQ(start_nvml_sampler(every_ms(5), &error), NvmlStart::kAbsent);
  }
}

TEST(NvmlSampler, ThinningKeepsMemoryBoundedOverTheWholeRun) {
  // GIVEN room for 8 samples per GPU, at 1 ms
  NvmlScript script(kTwoGpus);
  NvmlSamplerOptions o = every_ms(1);
  o.capacity = 8;
  const int64_t t0 = now_ns();
  // WHEN it runs for 150 ms (~150 ticks)
  const torchneck::Run run = sample_for(o, 150);
  const int64_t t1 = now_ns();
  // THEN each GPU keeps at most 8 (+ the last one, at stop), spread over the
  // whole run, and the period says how far apart they are
  for (uint32_t d = 0; d < 2; ++d) {
    const auto g = of_device(run, d);
    EXPECT_LE(g.size(), 9u);
    EXPECT_GE(g.size(), 4u);
    // (within 20 ms of either end: far less than the 150 ms run, and room
    // for a loaded machine's scheduling)
    EXPECT_LT(g.front().t_ns - t0, 20 * kMs);
    EXPECT_LT(t1 - g.back().t_ns, 20 * kMs);
  }
  EXPECT_GE(run.nvml_interval_ns, 16 * kMs);
}

TEST(NvmlSampler, ASnapshotWhileRunningHasTheSamplesSoFar) {
  // GIVEN the sampler running every 5 ms
  NvmlScript script(kTwoGpus);
  std::string error;
  ASSERT_EQ(start_nvml_sampler(every_ms(5), &error), NvmlStart::kStarted) << error;
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  // WHEN a spill takes a snapshot
  torchneck::Run spill;
  ASSERT_TRUE(snapshot_nvml_sampler(spill, 100 * kMs));
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  stop_nvml_sampler();
  torchneck::Run run;
  collect_nvml_sampler(run);
  // THEN it has both GPUs and the samples so far, which the end keeps and adds to
  ASSERT_EQ(spill.nvml_devices.size(), 2u);
  const size_t so_far = of_device(spill, 0).size();
  EXPECT_GE(so_far, 3u);
  EXPECT_GT(of_device(run, 0).size(), so_far);
  EXPECT_EQ(of_device(run, 0)[so_far - 1].t_ns, of_device(spill, 0).back().t_ns);
}

TEST(NvmlSampler, AForkedChildDropsTheParentsSamplerAndTheParentGoesOn) {
  NvmlScript script(kTwoGpus);
  std::string error;
  ASSERT_EQ(start_nvml_sampler(every_ms(5), &error), NvmlStart::kStarted) << error;
  const pid_t child = ::fork();
  if (child == 0) {
    discard_nvml_sampler();
    torchneck::Run run;
    collect_nvml_sampler(run);
    ::_exit(run.nvml.empty() && run.nvml_devices.empty() ? 0 : 1);
  }
  int status = -1;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  stop_nvml_sampler();
  torchneck::Run run;
  collect_nvml_sampler(run);
  EXPECT_GE(of_device(run, 0).size(), 3u);
}

TEST(NvmlSampler, ACallThatHangsDoesNotHangTheEndOfTheRun) {
  // GIVEN GPU 0's utilisation call of sample 2 taking 1.5 s, and a stop that
  // waits 100 ms
  NvmlScript script(std::string(kTwoGpus) + "hang 0 2 1500\n");
  NvmlSamplerOptions o = every_ms(5);
  o.stop_wait_ns = 100 * kMs;
  std::string error;
  ASSERT_EQ(start_nvml_sampler(o, &error), NvmlStart::kStarted) << error;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // WHEN the run ends while the call is stuck
  const auto before = std::chrono::steady_clock::now();
  stop_nvml_sampler();
  torchneck::Run run;
  collect_nvml_sampler(run);
  const auto waited = std::chrono::steady_clock::now() - before;
  // THEN the stop returns after its wait, not the call's, with the samples
  // taken before it and a note
  EXPECT_LT(waited, std::chrono::milliseconds(1000));
  EXPECT_EQ(of_device(run, 0).size(), 2u);
  ASSERT_EQ(run.notes.size(), 1u);
  EXPECT_NE(run.notes[0].find("did not return within 0.1 s"), std::string::npos) << run.notes[0];
  // (the thread left behind ends when the call returns; the stand-in stays loaded)
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
}

}  // namespace
}  // namespace torchneck
