// no_mixed_precision: an NVIDIA GPU with tensor cores, and no kernel uses
// them.
#include "analyze/detectors/gpu_evidence.h"

namespace torchneck {
namespace {

// Volta (compute capability 7.0) is the first with tensor cores.
constexpr int kFirstTensorCoreMajor = 7;
constexpr size_t kKernelNameShown = 80;

}  // namespace

void detect_no_mixed_precision(const DiagnosisInput& in, std::vector<Finding>& out) {
  if (in.gpu == nullptr) return;
  const gpu::GpuFacts& g = in.gpu->facts;
  // NVIDIA only: the tensor-core kernel names are NVIDIA's, and an AMD
  // device's computeMajor is not a CUDA compute capability.
  const bool nvidia = g.device_name.find("AMD") == std::string::npos &&
                      g.device_name.find("Radeon") == std::string::npos &&
                      g.device_name.find("Instinct") == std::string::npos;
  if (!nvidia || g.compute_major < kFirstTensorCoreMajor || g.kernels == 0 || g.any_tensor_cores) return;
  Finding f = make_finding(FindingId::no_mixed_precision);
  f.title = "No kernel uses the tensor cores of the " + (g.device_name.empty() ? std::string("GPU") : g.device_name);
  f.evidence.push_back("compute capability " + std::to_string(g.compute_major) + ".x has tensor cores; none of the " +
                       std::to_string(g.kernels) + " kernels is a tensor-core kernel (by name, the TensorBoard plugin's list)");
  if (!g.top_kernels.empty())
    f.evidence.push_back("heaviest kernel: " + g.top_kernels.front().name.substr(0, kKernelNameShown) + " (" +
                         fmt_pct(g.top_kernels.front().share) + " of kernel time)");
  f.recommendation = "Mixed precision: with torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16) (or float16 "
                     "with torch.cuda.amp.GradScaler) around forward and loss; or torch.backends.cuda.matmul."
                     "allow_tf32 = True on Ampere and later";
  f.gain_arithmetic = "not estimated: tensor cores speed up matrix multiplies and convolutions, not the rest";
  out.push_back(std::move(f));
}

}  // namespace torchneck
