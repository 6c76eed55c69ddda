#pragma once
// Internal: CUDA error handling and RAII buffers shared by the .cu and .cc sources.
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace tidegate::kernels::detail {

[[noreturn]] void throw_cuda(cudaError_t e, const char* what, const char* file, int line);
inline void check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) throw_cuda(e, what, file, line);
}
#define TG_CUDA_CHECK(expr) ::tidegate::kernels::detail::check((expr), #expr, __FILE__, __LINE__)

// Plain cudaMalloc'd storage (never managed memory). reserve() discards the contents.
template <class T>
class DeviceBuffer final {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) { reserve(n); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  void reserve(std::size_t n) {
    if (n <= n_) return;
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
    TG_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
    n_ = n;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// Page-locked host staging so small copies are real DMA transfers.
template <class T>
class PinnedBuffer final {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  void reserve(std::size_t n) {
    if (n <= n_) return;
    if (p_) cudaFreeHost(p_);
    p_ = nullptr;
    n_ = 0;
    TG_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(T)));
    n_ = n;
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

class Stream final {
 public:
  Stream() { TG_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { cudaStreamDestroy(s_); }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

}  // namespace tidegate::kernels::detail
