#pragma once
// CPU references for every GPU kernel: plain fp32 loops with no cleverness, so a mismatch points
// at the kernel. Tests and benchmarks compare the device results against these.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tidegate/encoder/vector_index.h"

namespace tidegate::kernels::ref {

// Exact top-k by inner product over rows[n][dim] (fp32 accumulation, in index order), best first;
// equal scores order by smaller id. Rows and queries should already be rounded to fp16 (see
// round_to_half) to reproduce the device's inputs. Missing results are {-1, 0}.
std::vector<encoder::SearchHit> flat_topk(const float* rows, const std::int64_t* ids, std::size_t n,
                                        std::size_t dim, const float* queries, std::size_t nq,
                                        std::size_t k);

// out[r] = LayerNorm(x[r] + bias + residual[r]) * gamma + beta over h columns; bias may be null.
void residual_layernorm(const float* x, const float* bias, const float* residual, const float* gamma,
                        const float* beta, std::size_t rows, std::size_t h, float eps, float* out);

// BERT's GELU, 0.5 x (1 + erf(x / sqrt 2)).
float gelu_erf(float x);
// x[r][c] = gelu(x[r][c] + bias[c]) in place.
void bias_gelu(float* x, const float* bias, std::size_t rows, std::size_t n);

// scores[b][h][i][j] (L x L per head) becomes softmax_j(scale * s) over j < lengths[b]; keys at
// j >= lengths[b] get probability 0.
void masked_softmax(float* scores, std::size_t batch, std::size_t heads, std::size_t len,
                    const std::int32_t* lengths, float scale);

// out[b] = L2-normalise(mean over i < lengths[b] of hidden[b][i]) for hidden[batch][len][h].
void mean_pool_l2(const float* hidden, std::size_t batch, std::size_t len, std::size_t h,
                  const std::int32_t* lengths, float* out);

}  // namespace tidegate::kernels::ref
