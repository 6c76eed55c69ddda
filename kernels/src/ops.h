#pragma once
// Internal: the encoder's fused element-wise kernels (ops.cu). Activations are fp16, parameters
// fp32, arithmetic fp32. Every launcher is asynchronous on `stream` and checks the launch.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tidegate::kernels::detail {

// out[b][i] = LayerNorm(word[ids[b][i]] + pos[i] + type_table[types[b][i]]) for batch x len
// tokens of width h; types null means type 0 everywhere (a single sentence).
void launch_embed_layernorm(const std::int32_t* ids, const std::int32_t* types, int batch, int len, int h,
                            const __half* word, const __half* pos, const __half* type_table, const float* gamma,
                            const float* beta, float eps, __half* out, cudaStream_t stream);

// out[r] = LayerNorm(x[r] + bias + residual[r]); bias may be null; out may alias residual or x.
void launch_residual_layernorm(const __half* x, const float* bias, const __half* residual, const float* gamma,
                               const float* beta, float eps, int rows, int h, __half* out, cudaStream_t stream);

// x = gelu_erf(x + bias) in place over rows x n.
void launch_bias_gelu(__half* x, const float* bias, int rows, int n, cudaStream_t stream);

// qkv [batch*len][3h] (+ bias) -> q, k, v each [batch][heads][len][h/heads].
void launch_qkv_split(const __half* qkv, const float* bias, int batch, int len, int heads, int head_dim,
                      __half* q, __half* k, __half* v, cudaStream_t stream);

// probs[b][h][i][:] = softmax(scale * scores[b][h][i][:]) over keys j < lengths[b]; 0 beyond.
void launch_masked_softmax(const float* scores, const std::int32_t* lengths, int batch, int heads, int len,
                           float scale, __half* probs, cudaStream_t stream);

// o [batch][heads][len][head_dim] -> out [batch*len][heads*head_dim].
void launch_merge_heads(const __half* o, int batch, int heads, int len, int head_dim, __half* out,
                        cudaStream_t stream);

// out[b] = L2-normalise(mean of hidden[b][i] for i < lengths[b]), hidden [batch][len][h].
void launch_mean_pool_l2(const __half* hidden, const std::int32_t* lengths, int batch, int len, int h, float* out,
                         cudaStream_t stream);

}  // namespace tidegate::kernels::detail
