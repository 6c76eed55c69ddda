#include "fast_flat_ip.h"

#include <faiss/impl/DistanceComputer.h>
#include <faiss/utils/fp16.h>

#include "tidegate/common/cpu_clones.h"

// GCC 12's own AVX-512 conversion intrinsics start from _mm512_undefined_ps(), which its
// uninitialised-use analysis flags; the values are fully overwritten.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace tidegate::cache {
namespace {

typedef float v16 __attribute__((vector_size(64), aligned(4)));

// Four accumulators hide the add latency; the default clone splits each v16 into SSE halves.
TIDEGATE_CPU_CLONES
float inner_product(const float* a, const float* b, std::size_t d) {
  v16 s0{}, s1{}, s2{}, s3{};
  std::size_t i = 0;
  v16 x[4], y[4];
  for (; i + 64 <= d; i += 64) {
    std::memcpy(x, a + i, sizeof(x));
    std::memcpy(y, b + i, sizeof(y));
    s0 += x[0] * y[0];
    s1 += x[1] * y[1];
    s2 += x[2] * y[2];
    s3 += x[3] * y[3];
  }
  for (; i + 16 <= d; i += 16) {
    std::memcpy(x, a + i, sizeof(x[0]));
    std::memcpy(y, b + i, sizeof(y[0]));
    s0 += x[0] * y[0];
  }
  const v16 s = (s0 + s1) + (s2 + s3);
  float sum = 0.f;
  for (int j = 0; j < 16; ++j) sum += s[j];
  for (; i < d; ++i) sum += a[i] * b[i];
  return sum;
}

// Element i of a query (floats, or halves when kHalfA). Tails and CPUs without F16C decode
// halves with FAISS's own portable conversion.
template <bool kHalfA>
float value_at(const void* a, std::size_t i) {
  if constexpr (kHalfA) {
    return faiss::decode_fp16(static_cast<const std::uint16_t*>(a)[i]);
  } else {
    return static_cast<const float*>(a)[i];
  }
}

// `A` loads 16 query values: floats, or halves widened.
template <bool kHalfA>
__attribute__((target("avx512f"))) __m512 load16_512(const void* p, std::size_t i) {
  if constexpr (kHalfA) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const std::uint16_t*>(p) + i)));
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(p) + i);
  }
}

template <bool kHalfA>
__attribute__((target("avx512f"))) float ip_f16_avx512(const void* a, const std::uint16_t* b, std::size_t d) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  std::size_t i = 0;
  for (; i + 32 <= d; i += 32) {
    s0 = _mm512_fmadd_ps(load16_512<kHalfA>(a, i), load16_512<true>(b, i), s0);
    s1 = _mm512_fmadd_ps(load16_512<kHalfA>(a, i + 16), load16_512<true>(b, i + 16), s1);
  }
  for (; i + 16 <= d; i += 16) s0 = _mm512_fmadd_ps(load16_512<kHalfA>(a, i), load16_512<true>(b, i), s0);
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
  for (; i < d; ++i) {
    sum += value_at<kHalfA>(a, i) * faiss::decode_fp16(b[i]);
  }
  return sum;
}

template <bool kHalfA>
__attribute__((target("avx2,fma,f16c"))) __m256 load8_256(const void* p, std::size_t i) {
  if constexpr (kHalfA) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(p) + i)));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  }
}

template <bool kHalfA>
__attribute__((target("avx2,fma,f16c"))) float ip_f16_avx2(const void* a, const std::uint16_t* b, std::size_t d) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  std::size_t i = 0;
  for (; i + 16 <= d; i += 16) {
    s0 = _mm256_fmadd_ps(load8_256<kHalfA>(a, i), load8_256<true>(b, i), s0);
    s1 = _mm256_fmadd_ps(load8_256<kHalfA>(a, i + 8), load8_256<true>(b, i + 8), s1);
  }
  const __m256 s = _mm256_add_ps(s0, s1);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float sum = 0.f;
  for (float x : lanes) sum += x;
  for (; i < d; ++i) {
    sum += value_at<kHalfA>(a, i) * faiss::decode_fp16(b[i]);
  }
  return sum;
}

template <bool kHalfA>
float ip_f16_scalar(const void* a, const std::uint16_t* b, std::size_t d) {
  float sum = 0.f;
  for (std::size_t i = 0; i < d; ++i) {
    sum += value_at<kHalfA>(a, i) * faiss::decode_fp16(b[i]);
  }
  return sum;
}

using HalfFn = float (*)(const void*, const std::uint16_t*, std::size_t);

template <bool kHalfA>
HalfFn pick_half() {
  __builtin_cpu_init();  // may run before libgcc's own constructor has
  if (__builtin_cpu_supports("avx512f")) return ip_f16_avx512<kHalfA>;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return ip_f16_avx2<kHalfA>;
  return ip_f16_scalar<kHalfA>;
}

float float_half(const void* a, const std::uint16_t* b, std::size_t d) {
  static const HalfFn fn = pick_half<false>();
  return fn(a, b, d);
}
float half_half(const void* a, const std::uint16_t* b, std::size_t d) {
  static const HalfFn fn = pick_half<true>();
  return fn(a, b, d);
}

class InnerProductComputer final : public faiss::FlatCodesDistanceComputer {
 public:
  explicit InnerProductComputer(const faiss::IndexFlat& storage)
      : faiss::FlatCodesDistanceComputer(storage.codes.data(), storage.code_size),
        base_(storage.get_xb()),
        d_(static_cast<std::size_t>(storage.d)) {}

  void set_query(const float* x) override { query_ = x; }
  float distance_to_code(const std::uint8_t* code) override {
    return inner_product(query_, reinterpret_cast<const float*>(code), d_);
  }
  float symmetric_dis(idx_t i, idx_t j) override {
    return inner_product(base_ + static_cast<std::size_t>(i) * d_, base_ + static_cast<std::size_t>(j) * d_, d_);
  }

 private:
  const float* base_;
  std::size_t d_;
  const float* query_ = nullptr;
};

class HalfInnerProductComputer final : public faiss::FlatCodesDistanceComputer {
 public:
  explicit HalfInnerProductComputer(const faiss::IndexScalarQuantizer& storage)
      : faiss::FlatCodesDistanceComputer(storage.codes.data(), storage.code_size),
        base_(reinterpret_cast<const std::uint16_t*>(storage.codes.data())),
        d_(static_cast<std::size_t>(storage.d)) {}

  void set_query(const float* x) override { query_ = x; }
  float distance_to_code(const std::uint8_t* code) override {
    return float_half(query_, reinterpret_cast<const std::uint16_t*>(code), d_);
  }
  float symmetric_dis(idx_t i, idx_t j) override {
    return half_half(base_ + static_cast<std::size_t>(i) * d_, base_ + static_cast<std::size_t>(j) * d_, d_);
  }

 private:
  const std::uint16_t* base_;
  std::size_t d_;
  const float* query_ = nullptr;
};

}  // namespace

faiss::FlatCodesDistanceComputer* FastFlatIP::get_FlatCodesDistanceComputer() const {
  return new InnerProductComputer(*this);
}

faiss::FlatCodesDistanceComputer* FastFp16IP::get_FlatCodesDistanceComputer() const {
  return new HalfInnerProductComputer(*this);
}

void FastFlatIP::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                        const faiss::SearchParameters* params) const {
  if (n >= 20 || params != nullptr || k <= 0) return faiss::IndexFlatIP::search(n, x, k, distances, labels, params);
  const auto dim = static_cast<std::size_t>(d);
  const float* base = get_xb();
  const auto kk = static_cast<std::size_t>(k);
  // Per query, a min-heap of the best k so far: the weakest kept result on top.
  std::vector<std::pair<float, idx_t>> heap;
  heap.reserve(kk);
  auto weaker = [](const std::pair<float, idx_t>& a, const std::pair<float, idx_t>& b) { return a.first > b.first; };
  for (idx_t q = 0; q < n; ++q) {
    const float* query = x + static_cast<std::size_t>(q) * dim;
    heap.clear();
    for (idx_t i = 0; i < ntotal; ++i) {
      const float s = inner_product(query, base + static_cast<std::size_t>(i) * dim, dim);
      if (heap.size() < kk) {
        heap.emplace_back(s, i);
        std::push_heap(heap.begin(), heap.end(), weaker);
      } else if (s > heap.front().first) {
        std::pop_heap(heap.begin(), heap.end(), weaker);
        heap.back() = {s, i};
        std::push_heap(heap.begin(), heap.end(), weaker);
      }
    }
    std::sort_heap(heap.begin(), heap.end(), weaker);  // best first
    for (std::size_t j = 0; j < kk; ++j) {
      const bool have = j < heap.size();
      distances[static_cast<std::size_t>(q) * kk + j] = have ? heap[j].first : -std::numeric_limits<float>::infinity();
      labels[static_cast<std::size_t>(q) * kk + j] = have ? heap[j].second : -1;
    }
  }
}

float fast_inner_product(const float* a, const float* b, std::size_t d) { return inner_product(a, b, d); }

float fast_inner_product_f16(const float* a, const std::uint16_t* b, std::size_t d) { return float_half(a, b, d); }

float fast_inner_product_f16f16(const std::uint16_t* a, const std::uint16_t* b, std::size_t d) {
  return half_half(a, b, d);
}

}  // namespace tidegate::cache

#pragma GCC diagnostic pop
