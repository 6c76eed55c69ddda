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

namespace {
DeviceInfo query_device(bool measure_copy_bandwidth) {
  cudaDeviceProp prop{};
  TG_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  DeviceInfo info{prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem, 0};
  if (!measure_copy_bandwidth) return info;
  // 1 GiB each way: far past the L2, so the copy runs at DRAM speed.
  const std::size_t bytes = std::size_t{1} << 30;
  detail::DeviceBuffer<unsigned char> a(bytes), b(bytes);
  cudaEvent_t start, stop;
  TG_CUDA_CHECK(cudaEventCreate(&start));
  TG_CUDA_CHECK(cudaEventCreate(&stop));
  TG_CUDA_CHECK(cudaMemset(a.get(), 1, bytes));
  TG_CUDA_CHECK(cudaMemcpy(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));  // warm-up
  constexpr int kReps = 10;
  TG_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < kReps; ++i) TG_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));
  TG_CUDA_CHECK(cudaEventRecord(stop));
  TG_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  TG_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  info.copy_gbps = 2.0 * static_cast<double>(bytes) * kReps / (ms * 1e-3) / 1e9;
  return info;
}
}  // namespace

std::optional<DeviceInfo> describe_device(bool measure_copy_bandwidth, std::string* why) {
  if (!gpu_available(why)) return std::nullopt;
  try {
    return query_device(measure_copy_bandwidth);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
}

}  // namespace tidegate::kernels
