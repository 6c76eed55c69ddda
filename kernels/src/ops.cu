// The encoder's non-GEMM work, fused so each activation tensor is read and written once per op.
#include <cuda_fp16.h>

#include "cuda_util.h"
#include "ops.h"

namespace tidegate::kernels::detail {
namespace {

constexpr int kRowThreads = 128;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; `scratch` holds one float per warp. Every thread gets the total.
__device__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = 0;
  for (int w = 0; w < warps; ++w) t += scratch[w];
  return t;
}

// LayerNorm of the row held in row_s (h floats), written as fp16. Two-pass variance: the
// residual stream can carry a large mean, where E[x^2] - E[x]^2 cancels badly.
__device__ void layernorm_row(const float* row_s, int h, const float* gamma, const float* beta, float eps,
                              __half* out, float* scratch) {
  float s = 0;
  for (int c = threadIdx.x; c < h; c += blockDim.x) s += row_s[c];
  const float mean = block_sum(s, scratch) / h;
  float v = 0;
  for (int c = threadIdx.x; c < h; c += blockDim.x) v += (row_s[c] - mean) * (row_s[c] - mean);
  const float inv = rsqrtf(block_sum(v, scratch) / h + eps);
  for (int c = threadIdx.x; c < h; c += blockDim.x) out[c] = __float2half_rn((row_s[c] - mean) * inv * gamma[c] + beta[c]);
}

__global__ void embed_layernorm_kernel(const int* ids, const int* types, int len, int h, const __half* word,
                                       const __half* pos, const __half* type_table, const float* gamma,
                                       const float* beta, float eps, __half* out) {
  extern __shared__ float row_s[];
  __shared__ float scratch[32];
  const int token = blockIdx.x;
  const int i = token % len;
  const __half* w = word + static_cast<size_t>(ids[token]) * h;
  const __half* p = pos + static_cast<size_t>(i) * h;
  const __half* t = type_table + (types ? static_cast<size_t>(types[token]) * h : 0);
  for (int c = threadIdx.x; c < h; c += blockDim.x)
    row_s[c] = __half2float(w[c]) + __half2float(p[c]) + __half2float(t[c]);
  __syncthreads();
  layernorm_row(row_s, h, gamma, beta, eps, out + static_cast<size_t>(token) * h, scratch);
}

__global__ void residual_layernorm_kernel(const __half* x, const float* bias, const __half* residual,
                                          const float* gamma, const float* beta, float eps, int h, __half* out) {
  extern __shared__ float row_s[];
  __shared__ float scratch[32];
  const size_t off = static_cast<size_t>(blockIdx.x) * h;
  for (int c = threadIdx.x; c < h; c += blockDim.x)
    row_s[c] = __half2float(x[off + c]) + (bias ? bias[c] : 0.f) + __half2float(residual[off + c]);
  __syncthreads();  // the whole row is in shared memory before out (which may alias) is written
  layernorm_row(row_s, h, gamma, beta, eps, out + off, scratch);
}

__global__ void bias_gelu_kernel(__half* x, const float* bias, size_t total, int n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = __half2float(x[i]) + bias[i % n];
    x[i] = __float2half_rn(0.5f * v * (1.f + erff(v * 0.70710678118654752f)));
  }
}

__global__ void qkv_split_kernel(const __half* qkv, const float* bias, int len, int heads, int head_dim,
                                 size_t total, __half* q, __half* k, __half* v) {
  const int h = heads * head_dim;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int col = static_cast<int>(i % (3 * h));
    const size_t token = i / (3 * h);
    const int which = col / h, hc = col % h, head = hc / head_dim, d = hc % head_dim;
    const size_t b = token / len, pos = token % len;
    const size_t dst = ((b * heads + head) * len + pos) * head_dim + d;
    const __half val = __float2half_rn(__half2float(qkv[i]) + bias[col]);
    (which == 0 ? q : which == 1 ? k : v)[dst] = val;
  }
}

// One warp per score row; a row of up to 256 keys is 8 values per lane.
__global__ void masked_softmax_kernel(const float* scores, const int* lengths, int heads, int len, float scale,
                                      int rows, __half* probs) {
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const int b = row / (heads * len);
  const int valid = min(max(lengths[b], 0), len);
  const float* s = scores + static_cast<size_t>(row) * len;
  __half* p = probs + static_cast<size_t>(row) * len;
  float mx = -INFINITY;
  for (int j = lane; j < valid; j += 32) mx = fmaxf(mx, s[j] * scale);
  mx = warp_max(mx);
  float sum = 0;
  for (int j = lane; j < valid; j += 32) sum += __expf(s[j] * scale - mx);
  sum = warp_sum(sum);
  const float inv = valid > 0 ? 1.f / sum : 0.f;
  for (int j = lane; j < len; j += 32) p[j] = __float2half_rn(j < valid ? __expf(s[j] * scale - mx) * inv : 0.f);
}

__global__ void merge_heads_kernel(const __half* o, int heads, int len, int head_dim, size_t total, __half* out) {
  const int h = heads * head_dim;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int col = static_cast<int>(i % h);
    const size_t token = i / h;
    const size_t b = token / len, pos = token % len;
    const int head = col / head_dim, d = col % head_dim;
    out[i] = o[((b * heads + head) * len + pos) * head_dim + d];
  }
}

__global__ void mean_pool_l2_kernel(const __half* hidden, const int* lengths, int len, int h, float* out) {
  extern __shared__ float mean_s[];
  __shared__ float scratch[32];
  const int b = blockIdx.x;
  const int valid = min(max(lengths[b], 0), len);
  const __half* base = hidden + static_cast<size_t>(b) * len * h;
  float sq = 0;
  for (int c = threadIdx.x; c < h; c += blockDim.x) {
    float s = 0;
    for (int i = 0; i < valid; ++i) s += __half2float(base[static_cast<size_t>(i) * h + c]);
    const float m = valid > 0 ? s / valid : 0.f;
    mean_s[c] = m;
    sq += m * m;
  }
  const float inv = 1.f / fmaxf(sqrtf(block_sum(sq, scratch)), 1e-12f);
  for (int c = threadIdx.x; c < h; c += blockDim.x) out[static_cast<size_t>(b) * h + c] = mean_s[c] * inv;
}

unsigned grid_for(size_t total) {
  const size_t blocks = (total + 255) / 256;
  return static_cast<unsigned>(blocks < 8192 ? (blocks ? blocks : 1) : 8192);
}

}  // namespace

void launch_embed_layernorm(const std::int32_t* ids, const std::int32_t* types, int batch, int len, int h,
                            const __half* word, const __half* pos, const __half* type_table, const float* gamma,
                            const float* beta, float eps, __half* out, cudaStream_t stream) {
  embed_layernorm_kernel<<<batch * len, kRowThreads, h * sizeof(float), stream>>>(
      ids, types, len, h, word, pos, type_table, gamma, beta, eps, out);
  TG_CUDA_CHECK(cudaGetLastError());
}

void launch_residual_layernorm(const __half* x, const float* bias, const __half* residual, const float* gamma,
                               const float* beta, float eps, int rows, int h, __half* out, cudaStream_t stream) {
  residual_layernorm_kernel<<<rows, kRowThreads, h * sizeof(float), stream>>>(x, bias, residual, gamma, beta, eps, h,
                                                                               out);
  TG_CUDA_CHECK(cudaGetLastError());
}

void launch_bias_gelu(__half* x, const float* bias, int rows, int n, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * n;
  bias_gelu_kernel<<<grid_for(total), 256, 0, stream>>>(x, bias, total, n);
  TG_CUDA_CHECK(cudaGetLastError());
}

void launch_qkv_split(const __half* qkv, const float* bias, int batch, int len, int heads, int head_dim, __half* q,
                      __half* k, __half* v, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(batch) * len * 3 * heads * head_dim;
  qkv_split_kernel<<<grid_for(total), 256, 0, stream>>>(qkv, bias, len, heads, head_dim, total, q, k, v);
  TG_CUDA_CHECK(cudaGetLastError());
}

void launch_masked_softmax(const float* scores, const std::int32_t* lengths, int batch, int heads, int len,
                           float scale, __half* probs, cudaStream_t stream) {
  const int rows = batch * heads * len;
  constexpr int kWarpsPerBlock = 8;
  masked_softmax_kernel<<<(rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kWarpsPerBlock * 32, 0, stream>>>(
      scores, lengths, heads, len, scale, rows, probs);
  TG_CUDA_CHECK(cudaGetLastError());
}

void launch_merge_heads(const __half* o, int batch, int heads, int len, int head_dim, __half* out,
                        cudaStream_t stream) {
  const size_t total = static_cast<size_t>(batch) * len * heads * head_dim;
  merge_heads_kernel<<<grid_for(total), 256, 0, stream>>>(o, heads, len, head_dim, total, out);
  TG_CUDA_CHECK(cudaGetLastError());
}

void launch_mean_pool_l2(const __half* hidden, const std::int32_t* lengths, int batch, int len, int h, float* out,
                         cudaStream_t stream) {
  mean_pool_l2_kernel<<<batch, kRowThreads, h * sizeof(float), stream>>>(hidden, lengths, len, h, out);
  TG_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tidegate::kernels::detail
