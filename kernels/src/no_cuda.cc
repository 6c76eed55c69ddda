// Built instead of the CUDA sources when TIDEGATE_HAVE_CUDA is off: same API, always "no".
#include "tidegate/kernels/gpu.h"

namespace tidegate::kernels {

namespace {
constexpr const char* kReason = "tidegate was built without CUDA (TIDEGATE_CUDA=OFF or no nvcc)";
void set(std::string* why) {
  if (why) *why = kReason;
}
}  // namespace

bool built_with_cuda() { return false; }

bool gpu_available(std::string* why) {
  set(why);
  return false;
}

std::optional<DeviceInfo> describe_device(bool, std::string* why) {
  set(why);
  return std::nullopt;
}

std::unique_ptr<encoder::VectorIndex> make_gpu_flat_index(std::size_t, std::string* why) {
  set(why);
  return nullptr;
}

bool enable_gpu_flat_kernel_timing(encoder::VectorIndex&) { return false; }
std::optional<double> gpu_flat_last_kernel_ms(const encoder::VectorIndex&) { return std::nullopt; }

std::unique_ptr<encoder::Embedder> make_gpu_minilm_embedder(const std::string&, const GpuEncoderOptions&,
                                                          std::string* why) {
  set(why);
  return nullptr;
}

std::unique_ptr<encoder::PairScorer> make_gpu_pair_verifier(std::shared_ptr<const encoder::PairVerifier>,
                                                          const GpuVerifierOptions&, std::string* why) {
  set(why);
  return nullptr;
}

}  // namespace tidegate::kernels
