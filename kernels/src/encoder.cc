// MiniLM on the GPU: fp16 weights and activations, cuBLAS GEMMs with fp32 accumulation, the fused
// kernels of ops.cu in between, and a micro-batcher whose thread alone touches the stream.
#include <cublas_v2.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "batcher.h"
#include "cuda_util.h"
#include "ops.h"
#include "tidegate/common/log.h"
#include "tidegate/kernels/gpu.h"
#include "tidegate/kernels/half.h"

#if TIDEGATE_KERNELS_WITH_MINILM
#include "tidegate/encoder/minilm.h"
#endif

namespace tidegate::kernels {

#if TIDEGATE_KERNELS_WITH_MINILM
namespace {

using detail::DeviceBuffer;

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

struct LayerDev {
  DeviceBuffer<__half> qkv_w, out_w, ffn_in_w, ffn_out_w;
  DeviceBuffer<float> qkv_b, out_b, ln1_g, ln1_b, ffn_in_b, ffn_out_b, ln2_g, ln2_b;
};

// The forward pass. Not thread-safe: only the batcher thread calls run().
class GpuMiniLM final {
 public:
  explicit GpuMiniLM(const encoder::MiniLMWeights& w) : cfg_(w.config) {
    const std::size_t h = cfg_.hidden, inter = cfg_.intermediate;
    if (h % cfg_.heads != 0) throw std::invalid_argument("hidden size not divisible by heads");
    word_ = upload_half(w.word_embeddings, cfg_.vocab_size * h);
    pos_ = upload_half(w.position_embeddings, cfg_.max_position * h);
    type0_ = upload_half(w.token_type_embeddings, h);
    emb_g_ = upload_float(w.embed_ln_gamma, h);
    emb_b_ = upload_float(w.embed_ln_beta, h);
    for (const auto& l : w.layers) {
      LayerDev d;
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
  GpuMiniLM(const GpuMiniLM&) = delete;
  GpuMiniLM& operator=(const GpuMiniLM&) = delete;
  ~GpuMiniLM() {
    if (blas_) cublasDestroy(blas_);
  }

  std::size_t dim() const { return cfg_.hidden; }

  std::vector<float> run(const std::vector<const detail::TokenIds*>& seqs, std::int32_t pad_id) {
    if (!blas_) {  // created lazily so the handle belongs to the thread that uses it
      check_cublas(cublasCreate(&blas_), "cublasCreate");
      check_cublas(cublasSetStream(blas_, stream_.get()), "cublasSetStream");
    }
    const int b = static_cast<int>(seqs.size());
    std::size_t max_len = 1;
    for (const auto* s : seqs) max_len = std::max(max_len, s->size());
    max_len = std::min(max_len, cfg_.max_position);
    const int len = static_cast<int>(max_len);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(b) * len, pad_id), lengths(b);
    for (int i = 0; i < b; ++i) {
      const std::size_t n = std::min(seqs[i]->size(), max_len);
      std::copy_n(seqs[i]->begin(), n, ids.begin() + static_cast<std::ptrdiff_t>(i) * len);
      lengths[i] = static_cast<std::int32_t>(n);
    }
    reserve(static_cast<std::size_t>(b), max_len);
    cudaStream_t s = stream_.get();
    TG_CUDA_CHECK(cudaMemcpyAsync(ids_.get(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, s));
    TG_CUDA_CHECK(cudaMemcpyAsync(lengths_.get(), lengths.data(), lengths.size() * 4, cudaMemcpyHostToDevice, s));

    const int h = static_cast<int>(cfg_.hidden), inter = static_cast<int>(cfg_.intermediate);
    const int heads = static_cast<int>(cfg_.heads), hd = h / heads, rows = b * len;
    const float eps = cfg_.layer_norm_eps, scale = 1.0f / std::sqrt(static_cast<float>(hd));
    detail::launch_embed_layernorm(ids_.get(), b, len, h, word_.get(), pos_.get(), type0_.get(), emb_g_.get(),
                                   emb_b_.get(), eps, x_.get(), s);
    for (const LayerDev& l : layers_) {
      gemm(x_.get(), l.qkv_w.get(), rows, 3 * h, h, qkv_.get());
      detail::launch_qkv_split(qkv_.get(), l.qkv_b.get(), b, len, heads, hd, q_.get(), k_.get(), v_.get(), s);
      attention_scores(b * heads, len, hd);
      detail::launch_masked_softmax(scores_.get(), lengths_.get(), b, heads, len, scale, probs_.get(), s);
      attention_values(b * heads, len, hd);
      detail::launch_merge_heads(o_.get(), b, heads, len, hd, merged_.get(), s);
      gemm(merged_.get(), l.out_w.get(), rows, h, h, tmp_.get());
      detail::launch_residual_layernorm(tmp_.get(), l.out_b.get(), x_.get(), l.ln1_g.get(), l.ln1_b.get(), eps,
                                        rows, h, x_.get(), s);
      gemm(x_.get(), l.ffn_in_w.get(), rows, inter, h, ffn_.get());
      detail::launch_bias_gelu(ffn_.get(), l.ffn_in_b.get(), rows, inter, s);
      gemm(ffn_.get(), l.ffn_out_w.get(), rows, h, inter, tmp_.get());
      detail::launch_residual_layernorm(tmp_.get(), l.ffn_out_b.get(), x_.get(), l.ln2_g.get(), l.ln2_b.get(), eps,
                                        rows, h, x_.get(), s);
    }
    detail::launch_mean_pool_l2(x_.get(), lengths_.get(), b, len, h, pooled_.get(), s);
    std::vector<float> out(static_cast<std::size_t>(b) * h);
    TG_CUDA_CHECK(cudaMemcpyAsync(out.data(), pooled_.get(), out.size() * 4, cudaMemcpyDeviceToHost, s));
    TG_CUDA_CHECK(cudaStreamSynchronize(s));
    return out;
  }

 private:
  void reserve(std::size_t b, std::size_t len) {
    const std::size_t rows = b * len, h = cfg_.hidden, heads = cfg_.heads;
    ids_.reserve(rows);
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
  void gemm(const __half* x, const __half* w, int m, int n, int k, __half* y) {
    const float one = 1.f, zero = 0.f;
    check_cublas(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, CUDA_R_16F, k, x, CUDA_R_16F, k,
                              &zero, y, CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }
  // scores[i] (len x len, fp32, row = query) = q[i] * k[i]^T for each (batch, head) i.
  void attention_scores(int count, int len, int hd) {
    const float one = 1.f, zero = 0.f;
    const long long qk_stride = static_cast<long long>(len) * hd, s_stride = static_cast<long long>(len) * len;
    check_cublas(cublasGemmStridedBatchedEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, len, len, hd, &one, k_.get(), CUDA_R_16F,
                                            hd, qk_stride, q_.get(), CUDA_R_16F, hd, qk_stride, &zero, scores_.get(),
                                            CUDA_R_32F, len, s_stride, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "attention scores");
  }
  // o[i] (len x hd) = probs[i] (len x len) * v[i] (len x hd).
  void attention_values(int count, int len, int hd) {
    const float one = 1.f, zero = 0.f;
    const long long v_stride = static_cast<long long>(len) * hd, p_stride = static_cast<long long>(len) * len;
    check_cublas(cublasGemmStridedBatchedEx(blas_, CUBLAS_OP_N, CUBLAS_OP_N, hd, len, len, &one, v_.get(), CUDA_R_16F,
                                            hd, v_stride, probs_.get(), CUDA_R_16F, len, p_stride, &zero, o_.get(),
                                            CUDA_R_16F, hd, v_stride, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "attention values");
  }

  const encoder::MiniLMConfig cfg_;
  detail::Stream stream_;
  cublasHandle_t blas_ = nullptr;
  DeviceBuffer<__half> word_, pos_, type0_;
  DeviceBuffer<float> emb_g_, emb_b_;
  std::vector<LayerDev> layers_;
  DeviceBuffer<std::int32_t> ids_, lengths_;
  DeviceBuffer<__half> x_, qkv_, q_, k_, v_, o_, merged_, tmp_, ffn_, probs_;
  DeviceBuffer<float> scores_, pooled_;
};

class GpuMiniLMEmbedder final : public encoder::Embedder {
 public:
  GpuMiniLMEmbedder(std::shared_ptr<const encoder::MiniLMModel> model, const GpuEncoderOptions& options)
      : model_(std::move(model)),
        max_tokens_(options.max_seq_length ? std::min(options.max_seq_length, model_->weights().config.max_seq_length)
                                           : model_->weights().config.max_seq_length),
        engine_(std::make_unique<GpuMiniLM>(model_->weights())),
        batcher_(options.max_batch, std::chrono::microseconds(options.max_wait_us), engine_->dim(),
                 [this](const std::vector<const detail::TokenIds*>& seqs) {
                   return engine_->run(seqs, model_->tokenizer().pad_id());
                 }) {}

  std::size_t dim() const override { return engine_->dim(); }
  std::string name() const override { return "minilm-gpu"; }

  std::vector<float> embed(const std::vector<std::string>& texts,
                           std::chrono::steady_clock::time_point deadline) override {
    // Tokenising on the caller's thread keeps the batcher thread feeding the GPU only.
    std::vector<detail::TokenIds> seqs;
    seqs.reserve(texts.size());
    for (const auto& t : texts) seqs.push_back(model_->tokenizer().encode(t, max_tokens_));
    return batcher_.submit(std::move(seqs), deadline);
  }

 private:
  const std::shared_ptr<const encoder::MiniLMModel> model_;
  const std::size_t max_tokens_;
  const std::unique_ptr<GpuMiniLM> engine_;
  detail::MicroBatcher batcher_;  // last: its thread stops before the engine goes away
};

}  // namespace

std::unique_ptr<encoder::Embedder> make_gpu_minilm_embedder(const std::string& model_dir,
                                                          const GpuEncoderOptions& options, std::string* why) {
  if (!gpu_available(why)) return nullptr;
  try {
    auto e = std::make_unique<GpuMiniLMEmbedder>(encoder::MiniLMModel::load(model_dir), options);
    log::info("gpu_encoder_ready", {{"model_dir", model_dir}, {"max_batch", options.max_batch},
                                    {"max_wait_us", options.max_wait_us}});
    return e;
  } catch (const std::exception& ex) {
    if (why) *why = std::string("gpu encoder creation failed: ") + ex.what();
    return nullptr;
  }
}

#else  // the CPU encoder library (loader, tokenizer) is not part of this build

std::unique_ptr<encoder::Embedder> make_gpu_minilm_embedder(const std::string&, const GpuEncoderOptions&,
                                                          std::string* why) {
  if (why) *why = "built without the MiniLM loader (tidegate_encoder target absent)";
  return nullptr;
}

#endif

}  // namespace tidegate::kernels
