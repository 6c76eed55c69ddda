#pragma once
// The semantic cache's pair verifier (issue 19): a small cross-encoder that reads (new prompt,
// cached prompt) together and gives the probability that the cached answer answers the new
// prompt. Trained by cache/verifier/train_verifier.py; run here natively on the MiniLM encoder
// code (no Python at run time).
//
// Weights: `<dir>/verifier.safetensors` holds the first `layers` BERT layers, the token-type
// embeddings, the embedding LayerNorm and a head on the [CLS] vector (classifier.weight [1, H],
// classifier.bias [1]), bf16 or fp32; its metadata says format, layers and max_tokens. The word
// and position embeddings are borrowed from the MiniLM model it was trained from.
//
// Input, exactly as the training script builds it: [CLS] a [SEP] b [SEP], a and b word pieces
// without specials, cut longest-first (drop the last piece of the longer side; ties drop from
// b) to max_tokens in all; token type 0 for [CLS] a [SEP], 1 for b [SEP].
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tidegate/encoder/minilm.h"

namespace tidegate::encoder {

struct PairVerifierOptions {
  // kAuto: bf16 dense products where the CPU has AVX512-BF16 (as the MiniLM embedder).
  MiniLMPrecision precision = MiniLMPrecision::kAuto;
  // Threads one call may use (MiniLMOptions::intra_op_threads).
  int intra_op_threads = 1;
  // bf16 on the CPU's matrix tiles where it has them (MiniLMOptions::matrix_tiles).
  bool matrix_tiles = true;
};

struct PairTokens {
  std::vector<std::int32_t> ids;
  std::vector<std::int32_t> types;
};

// What the semantic cache asks of a verifier (PairVerifier; tests give it stand-ins).
class PairScorer {
 public:
  virtual ~PairScorer() = default;
  // One probability in [0, 1] per candidate; throws on failure or when `deadline` passes.
  virtual std::vector<float> verify(std::string_view query, const std::vector<std::string>& candidates,
                                    std::chrono::steady_clock::time_point deadline) const = 0;
  virtual std::string name() const = 0;
};

class PairVerifier final : public PairScorer {
 public:
  static constexpr const char* kWeightsFile = "verifier.safetensors";

  // Throws std::runtime_error naming the file (missing, corrupt, wrong format, a tensor missing
  // or of the wrong shape). `base` supplies the word and position embeddings and the tokenizer.
  static std::unique_ptr<PairVerifier> load(const std::string& dir, std::shared_ptr<const MiniLMModel> base,
                                            const PairVerifierOptions& options = {});
  ~PairVerifier() override;
  PairVerifier(const PairVerifier&) = delete;
  PairVerifier& operator=(const PairVerifier&) = delete;

  PairTokens encode(std::string_view a, std::string_view b) const;

  // One probability per candidate: P(candidate's answer answers `query`), with `query` as
  // segment a and the candidate as b (the order it was trained in both ways). All pairs run as
  // one batch. Throws std::runtime_error when `deadline` passes (checked before each layer).
  std::vector<float> verify(std::string_view query, const std::vector<std::string>& candidates,
                            std::chrono::steady_clock::time_point deadline) const override;
  std::string name() const override { return "pair-verifier"; }
  std::vector<float> score(const std::vector<PairTokens>& pairs,
                           std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) const;

  std::size_t layers() const;
  std::size_t max_tokens() const { return max_tokens_; }
  // The loaded tensors as fp32 (config.layers is the verifier's own count), for the GPU path in
  // kernels/ to upload exactly what runs here. Valid as long as this object.
  const MiniLMWeights& weights() const;
  // The head: P(match) from one pair's [CLS] vector after the last layer (hidden floats), summed
  // in double. score() uses it; so does the GPU path, on the rows it computes.
  float probability_from_cls(const float* cls) const;
  const MiniLMModel& base() const { return *base_; }
  // The arithmetic its dense layers run ("fp32" or "bf16").
  const char* precision() const;
  // Whether they run on the CPU's matrix tiles (PairVerifierOptions::matrix_tiles).
  bool matrix_tiles() const;
  const std::string& weights_path() const { return path_; }

 private:
  struct Impl;
  PairVerifier() = default;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<const MiniLMModel> base_;
  std::string path_;
  std::size_t max_tokens_ = 0;
};

}  // namespace tidegate::encoder
