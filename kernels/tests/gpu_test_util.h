#pragma once
// Shared helpers of the device tests: skip without a GPU, upload/download fp16 data.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <cuda_fp16.h>

#include "cuda_util.h"
#include "tidegate/kernels/gpu.h"
#include "tidegate/kernels/half.h"

#define TG_SKIP_WITHOUT_GPU()                                                      \
  do {                                                                             \
    std::string why_;                                                              \
    if (!::tidegate::kernels::gpu_available(&why_)) GTEST_SKIP() << "no GPU: " << why_; \
  } while (0)

namespace tidegate::kernels::testing {

inline std::vector<float> random_vector(std::size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = round_to_half(u(rng));  // representable exactly in fp16
  return v;
}

inline detail::DeviceBuffer<__half> to_device_half(const std::vector<float>& v) {
  std::vector<std::uint16_t> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = float_to_half_bits(v[i]);
  detail::DeviceBuffer<__half> d(v.size());
  TG_CUDA_CHECK(cudaMemcpy(d.get(), h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  return d;
}

template <class T>
detail::DeviceBuffer<T> to_device(const std::vector<T>& v) {
  detail::DeviceBuffer<T> d(v.size());
  TG_CUDA_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

inline std::vector<float> from_device_half(const detail::DeviceBuffer<__half>& d, std::size_t n) {
  std::vector<std::uint16_t> h(n);
  TG_CUDA_CHECK(cudaMemcpy(h.data(), d.get(), n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = half_bits_to_float(h[i]);
  return v;
}

inline std::vector<float> from_device(const detail::DeviceBuffer<float>& d, std::size_t n) {
  std::vector<float> v(n);
  TG_CUDA_CHECK(cudaMemcpy(v.data(), d.get(), n * 4, cudaMemcpyDeviceToHost));
  return v;
}

// |got - want| <= atol + rtol * |want| element-wise; reports the first offender.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, float atol, float rtol,
                         const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i]), atol + rtol * std::fabs(want[i]))
        << what << " at " << i << ": got " << got[i] << " want " << want[i];
}

}  // namespace tidegate::kernels::testing
