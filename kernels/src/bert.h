#pragma once
// Internal: the BERT forward pass on the GPU that both the MiniLM embedder (mean pooling) and the
// pair verifier ([CLS] row of a sentence pair) run. fp16 weights and activations, cuBLAS GEMMs
// with fp32 accumulation, the fused kernels of ops.cu in between. Not thread-safe: one thread
// (a MicroBatcher's) owns an instance, its stream and its cuBLAS handle.
#include <cublas_v2.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "batcher.h"
#include "cuda_util.h"
#include "tidegate/encoder/minilm.h"

namespace tidegate::kernels::detail {

class GpuBert final {
 public:
  // Uploads w's embeddings, its layers and every token-type row.
  explicit GpuBert(const encoder::MiniLMWeights& w);
  GpuBert(const GpuBert&) = delete;
  GpuBert& operator=(const GpuBert&) = delete;
  ~GpuBert();

  std::size_t hidden() const { return cfg_.hidden; }

  // One L2-normalised mean over each sequence's tokens (type 0 throughout): seqs.size() * hidden.
  std::vector<float> mean_pooled(const std::vector<const TokenIds*>& seqs, std::int32_t pad_id);

  // Each sequence's first ([CLS]) row after the last layer: seqs.size() * hidden. Sequences are
  // sentence pairs "[CLS] a [SEP] b [SEP]": type 0 through the first `sep_id`, 1 after it.
  std::vector<float> first_rows_of_pairs(const std::vector<const TokenIds*>& seqs, std::int32_t pad_id,
                                         std::int32_t sep_id);

 private:
  struct Layer {
    DeviceBuffer<__half> qkv_w, out_w, ffn_in_w, ffn_out_w;
    DeviceBuffer<float> qkv_b, out_b, ln1_g, ln1_b, ffn_in_b, ffn_out_b, ln2_g, ln2_b;
  };

  // Pads the batch, uploads ids (and, for pairs split at pair_sep, their token types) and runs
  // embeddings and every layer; the last hidden states are then in x_ as [batch][len][hidden].
  // Returns len.
  int forward(const std::vector<const TokenIds*>& seqs, std::int32_t pad_id, std::optional<std::int32_t> pair_sep);
  void reserve(std::size_t b, std::size_t len);
  void gemm(const __half* x, const __half* w, int m, int n, int k, __half* y);
  void attention_scores(int count, int len, int hd);
  void attention_values(int count, int len, int hd);

  const encoder::MiniLMConfig cfg_;
  Stream stream_;
  cublasHandle_t blas_ = nullptr;
  DeviceBuffer<__half> word_, pos_, types_table_;
  DeviceBuffer<float> emb_g_, emb_b_;
  std::vector<Layer> layers_;
  DeviceBuffer<std::int32_t> ids_, types_, lengths_;
  DeviceBuffer<__half> x_, qkv_, q_, k_, v_, o_, merged_, tmp_, ffn_, probs_;
  DeviceBuffer<float> scores_, pooled_;
};

}  // namespace tidegate::kernels::detail
