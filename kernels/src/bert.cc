// The GPU BERT forward pass shared by the MiniLM embedder (encoder.cc) and the pair verifier
// (verifier.cc). See bert.h.
#include "bert.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "ops.h"
#include "pair_segments.h"
#include "tidegate/kernels/half.h"

namespace tidegate::kernels::detail {
namespace {

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error ") + cublasGetStatusName(s) + " in " + what);
}

DeviceBuffer<__half> upload_half(const float* src, std::size_t n) {
  std::vector<std::uint16_t> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = float_to_half_bits(src[i]);
  DeviceBuffer<__half> d(n);
  TG_CUDA_CHECK(cudaMemcpy(d.get(), h.data(), n * 2, cudaMemcpyHostToDevice));
  return d;
}

DeviceBuffer<float> upload_float(const float* src, std::size_t n) {
  DeviceBuffer<float> d(n);
  TG_CUDA_CHECK(cudaMemcpy(d.get(), src, n * 4, cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

GpuBert::GpuBert(const encoder::MiniLMWeights& w) : cfg_(w.config) {
  const std::size_t h = cfg_.hidden, inter = cfg_.intermediate;
  if (h % cfg_.heads != 0) throw std::invalid_argument("hidden size not divisible by heads");
  if (cfg_.type_vocab_size < 1) throw std::invalid_argument("no token-type embeddings");
  word_ = upload_half(w.word_embeddings, cfg_.vocab_size * h);
  pos_ = upload_half(w.position_embeddings, cfg_.max_position * h);
  types_table_ = upload_half(w.token_type_embeddings, cfg_.type_vocab_size * h);
  emb_g_ = upload_float(w.embed_ln_gamma, h);
  emb_b_ = upload_float(w.embed_ln_beta, h);
  for (const auto& l : w.layers) {
    Layer d;
    d.qkv_w = upload_half(l.qkv_weight, 3 * h * h);
    d.qkv_b = upload_float(l.qkv_bias, 3 * h);
    d.out_w = upload_half(l.attn_out_weight, h * h);
    d.out_b = upload_float(l.attn_out_bias, h);
    d.ln1_g = upload_float(l.attn_ln_gamma, h);
    d.ln1_b = upload_float(l.attn_ln_beta, h);
    d.ffn_in_w = upload_half(l.ffn_in_weight, inter * h);
    d.ffn_in_b = upload_float(l.ffn_in_bias, inter);
    d.ffn_out_w = upload_half(l.ffn_out_weight, h * inter);
    d.ffn_out_b = upload_float(l.ffn_out_bias, h);
    d.ln2_g = upload_float(l.ffn_ln_gamma, h);
    d.ln2_b = upload_float(l.ffn_ln_beta, h);
    layers_.push_back(std::move(d));
  }
}

GpuBert::~GpuBert() {
  if (blas_) cublasDestroy(blas_);
}

std::vector<float> GpuBert::mean_pooled(const std::vector<const TokenIds*>& seqs, std::int32_t pad_id) {
  const int b = static_cast<int>(seqs.size());
  const int len = forward(seqs, pad_id, std::nullopt);
  cudaStream_t s = stream_.get();
  launch_mean_pool_l2(x_.get(), lengths_.get(), b, len, static_cast<int>(cfg_.hidden), pooled_.get(), s);
  std::vector<float> out(static_cast<std::size_t>(b) * cfg_.hidden);
  TG_CUDA_CHECK(cudaMemcpyAsync(out.data(), pooled_.get(), out.size() * 4, cudaMemcpyDeviceToHost, s));
  TG_CUDA_CHECK(cudaStreamSynchronize(s));
  return out;
}

std::vector<float> GpuBert::first_rows_of_pairs(const std::vector<const TokenIds*>& seqs, std::int32_t pad_id,
                                                std::int32_t sep_id) {
  const int len = forward(seqs, pad_id, sep_id);
  // The [CLS] rows are every len-th row of x_: one strided copy, converted on the host (a few
  // hundred values; the head that reads them runs on the host in double).
  const std::size_t b = seqs.size(), h = cfg_.hidden;
  std::vector<std::uint16_t> half_rows(b * h);
  cudaStream_t s = stream_.get();
  TG_CUDA_CHECK(cudaMemcpy2DAsync(half_rows.data(), h * 2, x_.get(), static_cast<std::size_t>(len) * h * 2, h * 2, b,
                                  cudaMemcpyDeviceToHost, s));
  TG_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> out(b * h);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = half_bits_to_float(half_rows[i]);
  return out;
}

int GpuBert::forward(const std::vector<const TokenIds*>& seqs, std::int32_t pad_id,
                     std::optional<std::int32_t> pair_sep) {
  if (!blas_) {  // created lazily so the handle belongs to the thread that uses it
    check_cublas(cublasCreate(&blas_), "cublasCreate");
    check_cublas(cublasSetStream(blas_, stream_.get()), "cublasSetStream");
  }
  const int b = static_cast<int>(seqs.size());
  std::size_t max_len = 1;
  for (const auto* q : seqs) max_len = std::max(max_len, q->size());
  max_len = std::min(max_len, cfg_.max_position);
  const int len = static_cast<int>(max_len);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(b) * len, pad_id), lengths(b), types;
  if (pair_sep) types.assign(ids.size(), 0);
  for (int i = 0; i < b; ++i) {
    const std::size_t n = std::min(seqs[i]->size(), max_len), row = static_cast<std::size_t>(i) * len;
    std::copy_n(seqs[i]->begin(), n, ids.begin() + static_cast<std::ptrdiff_t>(row));
    if (pair_sep) pair_segment_types(seqs[i]->data(), n, *pair_sep, types.data() + row);
    lengths[i] = static_cast<std::int32_t>(n);
  }
  reserve(static_cast<std::size_t>(b), max_len);
  cudaStream_t s = stream_.get();
  TG_CUDA_CHECK(cudaMemcpyAsync(ids_.get(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, s));
  TG_CUDA_CHECK(cudaMemcpyAsync(lengths_.get(), lengths.data(), lengths.size() * 4, cudaMemcpyHostToDevice, s));
  if (pair_sep)
    TG_CUDA_CHECK(cudaMemcpyAsync(types_.get(), types.data(), types.size() * 4, cudaMemcpyHostToDevice, s));

  const int h = static_cast<int>(cfg_.hidden), inter = static_cast<int>(cfg_.intermediate);
  const int heads = static_cast<int>(cfg_.heads), hd = h / heads, rows = b * len;
  const float eps = cfg_.layer_norm_eps, scale = 1.0f / std::sqrt(static_cast<float>(hd));
  launch_embed_layernorm(ids_.get(), pair_sep ? types_.get() : nullptr, b, len, h, word_.get(), pos_.get(),
                         types_table_.get(), emb_g_.get(), emb_b_.get(), eps, x_.get(), s);
  for (const Layer& l : layers_) {
    gemm(x_.get(), l.qkv_w.get(), rows, 3 * h, h, qkv_.get());
    launch_qkv_split(qkv_.get(), l.qkv_b.get(), b, len, heads, hd, q_.get(), k_.get(), v_.get(), s);
    attention_scores(b * heads, len, hd);
    launch_masked_softmax(scores_.get(), lengths_.get(), b, heads, len, scale, probs_.get(), s);
    attention_values(b * heads, len, hd);
    launch_merge_heads(o_.get(), b, heads, len, hd, merged_.get(), s);
    gemm(merged_.get(), l.out_w.get(), rows, h, h, tmp_.get());
    launch_residual_layernorm(tmp_.get(), l.out_b.get(), x_.get(), l.ln1_g.get(), l.ln1_b.get(), eps, rows, h,
                              x_.get(), s);
    gemm(x_.get(), l.ffn_in_w.get(), rows, inter, h, ffn_.get());
    launch_bias_gelu(ffn_.get(), l.ffn_in_b.get(), rows, inter, s);
    gemm(ffn_.get(), l.ffn_out_w.get(), rows, h, inter, tmp_.get());
    launch_residual_layernorm(tmp_.get(), l.ffn_out_b.get(), x_.get(), l.ln2_g.get(), l.ln2_b.get(), eps, rows, h,
                              x_.get(), s);
  }
  return len;
}

void GpuBert::reserve(std::size_t b, std::size_t len) {
  const std::size_t rows = b * len, h = cfg_.hidden, heads = cfg_.heads;
  ids_.reserve(rows);
  types_.reserve(rows);
  lengths_.reserve(b);
  x_.reserve(rows * h);
  qkv_.reserve(rows * 3 * h);
  q_.reserve(rows * h);
  k_.reserve(rows * h);
  v_.reserve(rows * h);
  o_.reserve(rows * h);
  merged_.reserve(rows * h);
  tmp_.reserve(rows * h);
  ffn_.reserve(rows * cfg_.intermediate);
  scores_.reserve(b * heads * len * len);
  probs_.reserve(b * heads * len * len);
  pooled_.reserve(b * h);
}

// Row-major y[m][n] = x[m][k] * w[n][k]^T (nn.Linear), i.e. column-major y^T = w^T-op * x.
void GpuBert::gemm(const __half* x, const __half* w, int m, int n, int k, __half* y) {
  const float one = 1.f, zero = 0.f;
  check_cublas(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, CUDA_R_16F, k, x, CUDA_R_16F, k, &zero,
                            y, CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

// scores[i] (len x len, fp32, row = query) = q[i] * k[i]^T for each (batch, head) i.
void GpuBert::attention_scores(int count, int len, int hd) {
  const float one = 1.f, zero = 0.f;
  const long long qk_stride = static_cast<long long>(len) * hd, s_stride = static_cast<long long>(len) * len;
  check_cublas(cublasGemmStridedBatchedEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, len, len, hd, &one, k_.get(), CUDA_R_16F,
                                          hd, qk_stride, q_.get(), CUDA_R_16F, hd, qk_stride, &zero, scores_.get(),
                                          CUDA_R_32F, len, s_stride, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "attention scores");
}

// o[i] (len x hd) = probs[i] (len x len) * v[i] (len x hd).
void GpuBert::attention_values(int count, int len, int hd) {
  const float one = 1.f, zero = 0.f;
  const long long v_stride = static_cast<long long>(len) * hd, p_stride = static_cast<long long>(len) * len;
  check_cublas(cublasGemmStridedBatchedEx(blas_, CUBLAS_OP_N, CUBLAS_OP_N, hd, len, len, &one, v_.get(), CUDA_R_16F,
                                          hd, v_stride, probs_.get(), CUDA_R_16F, len, p_stride, &zero, o_.get(),
                                          CUDA_R_16F, hd, v_stride, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "attention values");
}

}  // namespace tidegate::kernels::detail
