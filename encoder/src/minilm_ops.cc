#include "minilm_ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "tidegate/common/cpu_clones.h"

namespace tidegate::encoder {
namespace {

// Up to this length attention runs as register-tiled loops over a transposed K: sgemm's call
// overhead would dominate.
constexpr std::size_t kSmallSeq = 64;
// Partial sums kept apart so the reductions vectorise without reassociating fp32 adds.
constexpr std::size_t kLanes = 16;

float lane_sum(const float (&acc)[kLanes]) {
  float s = 0.f;
  for (float a : acc) s += a;
  return s;
}

TIDEGATE_CPU_CLONES
void softmax_rows(float* s, std::size_t rows, std::size_t cols) {
  for (std::size_t i = 0; i < rows; ++i) {
    float* row = s + i * cols;
    const float mx = *std::max_element(row, row + cols);
    float sum = 0.f;
    for (std::size_t j = 0; j < cols; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    const float inv = 1.f / sum;
    for (std::size_t j = 0; j < cols; ++j) row[j] *= inv;
  }
}

typedef float v16 __attribute__((vector_size(kLanes * sizeof(float)), aligned(4)));
constexpr std::size_t kMaxBlocks = kSmallSeq / kLanes;  // also bounds the head size: 64

__attribute__((always_inline)) inline v16 load16(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// scores[i][j] = scale * q_i . k_j for i < rows, j < n, NB blocks of 16 j at a time (kt: [dh][NB * 16]).
template <std::size_t NB>
__attribute__((always_inline)) inline void score_rows(const float* q, std::size_t ld, const float* kt, std::size_t n,
                                                      std::size_t rows, std::size_t dh, float scale, float* scores) {
  for (std::size_t i = 0; i < rows; ++i) {
    const float* qi = q + i * ld;
    v16 acc[NB] = {};
    for (std::size_t d = 0; d < dh; ++d) {
      const v16 qd = v16{} + qi[d];
      for (std::size_t b = 0; b < NB; ++b) acc[b] += qd * load16(kt + (d * NB + b) * kLanes);
    }
    for (std::size_t b = 0; b < NB; ++b) {
      const v16 out = acc[b] * scale;
      std::memcpy(scores + i * n + b * kLanes, &out, std::min(kLanes, n - b * kLanes) * sizeof(float));
    }
  }
}

// ctx_i = sum_j p_ij v_j for i < rows over a head of DB blocks of 16 dimensions.
template <std::size_t DB>
__attribute__((always_inline)) inline void context_rows(const float* p, std::size_t n, std::size_t rows, const float* v,
                                                        std::size_t ld, float* ctx, std::size_t ldc) {
  for (std::size_t i = 0; i < rows; ++i) {
    v16 acc[DB] = {};
    for (std::size_t j = 0; j < n; ++j) {
      const v16 pj = v16{} + p[i * n + j];
      for (std::size_t b = 0; b < DB; ++b) acc[b] += pj * load16(v + j * ld + b * kLanes);
    }
    std::memcpy(ctx + i * ldc, acc, sizeof(acc));
  }
}

// f(std::integral_constant<size_t, blocks>) for blocks in 1..kMaxBlocks.
template <typename F>
__attribute__((always_inline)) inline void dispatch_blocks(std::size_t blocks, F&& f) {
  switch (blocks) {
    case 1: return f(std::integral_constant<std::size_t, 1>{});
    case 2: return f(std::integral_constant<std::size_t, 2>{});
    case 3: return f(std::integral_constant<std::size_t, 3>{});
    default: return f(std::integral_constant<std::size_t, 4>{});
  }
}
static_assert(kMaxBlocks == 4, "dispatch_blocks covers 1..4 blocks");

}  // namespace

TIDEGATE_CPU_CLONES
void add_layer_norm(float* x, const float* residual, std::size_t rows, std::size_t dim, const float* gamma,
                    const float* beta, float eps) {
  const std::size_t body = dim - dim % kLanes;
  for (std::size_t r = 0; r < rows; ++r) {
    float* row = x + r * dim;
    if (residual != nullptr) {
      const float* add = residual + r * dim;
      for (std::size_t i = 0; i < dim; ++i) row[i] += add[i];
    }
    float acc[kLanes] = {};
    for (std::size_t i = 0; i < body; i += kLanes)
      for (std::size_t l = 0; l < kLanes; ++l) acc[l] += row[i + l];
    float total = lane_sum(acc);
    for (std::size_t i = body; i < dim; ++i) total += row[i];
    const float mean = total / static_cast<float>(dim);
    float sq[kLanes] = {};
    for (std::size_t i = 0; i < body; i += kLanes)
      for (std::size_t l = 0; l < kLanes; ++l) {
        const float d = row[i + l] - mean;
        sq[l] += d * d;
      }
    float var = lane_sum(sq);
    for (std::size_t i = body; i < dim; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<float>(dim);
    const float inv = 1.f / std::sqrt(var + eps);
    for (std::size_t i = 0; i < dim; ++i) row[i] = (row[i] - mean) * inv * gamma[i] + beta[i];
  }
}

TIDEGATE_CPU_CLONES
void attend(const float* q, const float* k, const float* v, std::size_t ld, std::size_t n, std::size_t rows,
            std::size_t dh, float scale, float* scratch, float* ctx, std::size_t ldc) {
  rows = std::min(rows, n);
  float* scores = scratch;
  const std::size_t blocks = (n + kLanes - 1) / kLanes, head_blocks = dh / kLanes;
  if (n <= kSmallSeq && dh % kLanes == 0 && head_blocks <= kMaxBlocks) {
    // kt[d][j] = k[j][d], zero-padded to whole blocks of j: each query row then updates a
    // block of scores per head dimension with one multiply-add, accumulators in registers.
    float* kt = scratch + n * n;
    const std::size_t ldt = blocks * kLanes;
    for (std::size_t d = 0; d < dh; ++d) {
      for (std::size_t j = 0; j < n; ++j) kt[d * ldt + j] = k[j * ld + d];
      std::fill(kt + d * ldt + n, kt + (d + 1) * ldt, 0.f);
    }
    dispatch_blocks(blocks, [&](auto nb) { score_rows<decltype(nb)::value>(q, ld, kt, n, rows, dh, scale, scores); });
    softmax_rows(scores, rows, n);
    dispatch_blocks(head_blocks, [&](auto db) { context_rows<decltype(db)::value>(scores, n, rows, v, ld, ctx, ldc); });
    return;
  }
  const int N = static_cast<int>(n), R = static_cast<int>(rows), D = static_cast<int>(dh), LD = static_cast<int>(ld);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, N, D, scale, q, LD, k, LD, 0.f, scores, N);
  softmax_rows(scores, rows, n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, D, N, 1.f, scores, N, v, LD, 0.f, ctx,
              static_cast<int>(ldc));
}

}  // namespace tidegate::encoder
