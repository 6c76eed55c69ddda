// Device discovery. Linked against the static CUDA runtime, so a host without libcuda answers
// cudaErrorInsufficientDriver here instead of failing to load the binary.
#include <cuda_runtime.h>

#include <string>

#include "cuda_util.h"
#include "tidegate/kernels/gpu.h"

namespace tidegate::kernels {

namespace detail {
void throw_cuda(cudaError_t e, const char* what, const char* file, int line) {
  cudaGetLastError();  // clear a sticky non-fatal error so the next call starts clean
  throw std::runtime_error(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                           ") in " + what + " at " + file + ":" + std::to_string(line));
}
}  // namespace detail

bool built_with_cuda() { return true; }

bool gpu_available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) {
      if (e == cudaErrorNoDevice)
        *why = "no CUDA device found";
      else if (e == cudaErrorInsufficientDriver)
        *why = "no usable NVIDIA driver (libcuda missing or older than the CUDA runtime)";
      else
        *why = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(e);
    }
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = "cudaGetDeviceProperties failed for device 0";
    return false;
  }
  // The binary carries sm_80 and sm_90 code and sm_90 PTX; older devices can run none of it.
  if (prop.major < 8) {
    if (why)
      *why = std::string("device 0 (") + prop.name + ") has compute capability " + std::to_string(prop.major) +
             "." + std::to_string(prop.minor) + "; the kernels need 8.0 or newer";
    return false;
  }
  return true;
}

}  // namespace tidegate::kernels
