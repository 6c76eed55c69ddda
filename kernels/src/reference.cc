#include "tidegate/kernels/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tidegate::kernels::ref {

std::vector<encoder::SearchHit> flat_topk(const float* rows, const std::int64_t* ids, std::size_t n,
                                        std::size_t dim, const float* queries, std::size_t nq,
                                        std::size_t k) {
  std::vector<encoder::SearchHit> out(nq * k);
  std::vector<encoder::SearchHit> all(n);
  for (std::size_t q = 0; q < nq; ++q) {
    const float* qv = queries + q * dim;
    for (std::size_t r = 0; r < n; ++r) {
      const float* rv = rows + r * dim;
      float s = 0;
      for (std::size_t d = 0; d < dim; ++d) s += qv[d] * rv[d];
      all[r] = {ids[r], s};
    }
    const std::size_t take = std::min(k, n);
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(take), all.end(),
                      [](const encoder::SearchHit& a, const encoder::SearchHit& b) {
                        return a.score != b.score ? a.score > b.score : a.id < b.id;
                      });
    std::copy_n(all.begin(), take, out.begin() + static_cast<std::ptrdiff_t>(q * k));
  }
  return out;
}

void residual_layernorm(const float* x, const float* bias, const float* residual, const float* gamma,
                        const float* beta, std::size_t rows, std::size_t h, float eps, float* out) {
  std::vector<float> v(h);
  for (std::size_t r = 0; r < rows; ++r) {
    double mean = 0;
    for (std::size_t c = 0; c < h; ++c) {
      v[c] = x[r * h + c] + (bias ? bias[c] : 0.f) + residual[r * h + c];
      mean += v[c];
    }
    mean /= static_cast<double>(h);
    double var = 0;
    for (std::size_t c = 0; c < h; ++c) var += (v[c] - mean) * (v[c] - mean);
    var /= static_cast<double>(h);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (std::size_t c = 0; c < h; ++c)
      out[r * h + c] = static_cast<float>((v[c] - mean) * inv) * gamma[c] + beta[c];
  }
}

float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

void bias_gelu(float* x, const float* bias, std::size_t rows, std::size_t n) {
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < n; ++c) x[r * n + c] = gelu_erf(x[r * n + c] + bias[c]);
}

void masked_softmax(float* scores, std::size_t batch, std::size_t heads, std::size_t len,
                    const std::int32_t* lengths, float scale) {
  for (std::size_t b = 0; b < batch; ++b) {
    const auto valid = static_cast<std::size_t>(std::clamp<std::int32_t>(lengths[b], 0, static_cast<std::int32_t>(len)));
    for (std::size_t row = 0; row < heads * len; ++row) {
      float* s = scores + (b * heads * len + row) * len;
      float mx = -std::numeric_limits<float>::infinity();
      for (std::size_t j = 0; j < valid; ++j) mx = std::max(mx, s[j] * scale);
      double sum = 0;
      for (std::size_t j = 0; j < valid; ++j) sum += std::exp(s[j] * scale - mx);
      for (std::size_t j = 0; j < len; ++j)
        s[j] = j < valid ? static_cast<float>(std::exp(s[j] * scale - mx) / sum) : 0.f;
    }
  }
}

void mean_pool_l2(const float* hidden, std::size_t batch, std::size_t len, std::size_t h,
                  const std::int32_t* lengths, float* out) {
  for (std::size_t b = 0; b < batch; ++b) {
    const auto valid = static_cast<std::size_t>(std::clamp<std::int32_t>(lengths[b], 0, static_cast<std::int32_t>(len)));
    double norm = 0;
    for (std::size_t c = 0; c < h; ++c) {
      double sum = 0;
      for (std::size_t i = 0; i < valid; ++i) sum += hidden[(b * len + i) * h + c];
      const double mean = valid ? sum / static_cast<double>(valid) : 0.0;
      out[b * h + c] = static_cast<float>(mean);
      norm += mean * mean;
    }
    // Same floor as sentence-transformers' normalize (F.normalize eps = 1e-12).
    const double inv = 1.0 / std::max(std::sqrt(norm), 1e-12);
    for (std::size_t c = 0; c < h; ++c) out[b * h + c] = static_cast<float>(out[b * h + c] * inv);
  }
}

}  // namespace tidegate::kernels::ref
