#include "fast_flat_ip.h"

#include <faiss/impl/DistanceComputer.h>

#include <cstring>

namespace tidegate::cache {
namespace {

typedef float v16 __attribute__((vector_size(64), aligned(4)));

// Four accumulators hide the add latency; the default clone splits each v16 into SSE halves.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
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

}  // namespace

faiss::FlatCodesDistanceComputer* FastFlatIP::get_FlatCodesDistanceComputer() const {
  return new InnerProductComputer(*this);
}

float fast_inner_product(const float* a, const float* b, std::size_t d) { return inner_product(a, b, d); }

}  // namespace tidegate::cache
