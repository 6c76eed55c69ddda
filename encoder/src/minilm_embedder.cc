#include <cblas.h>

#include <mutex>
#include <stdexcept>

#include "intra_op.h"
#include "minilm_internal.h"

namespace tidegate::encoder {
namespace {

class MiniLMEmbedder final : public Embedder {
 public:
  MiniLMEmbedder(std::shared_ptr<const MiniLMModel> model, DenseMath math, std::size_t max_seq,
                 std::size_t max_pass_tokens, std::size_t intra_op_threads)
      : model_(std::move(model)), packed_(pack_minilm(model_->weights(), math)), max_seq_(max_seq),
        max_pass_tokens_(max_pass_tokens),
        pool_(intra_op_threads > 1 ? std::make_unique<IntraOpPool>(intra_op_threads - 1) : nullptr) {}

  std::size_t dim() const override { return model_->weights().config.hidden; }
  std::string name() const override { return "minilm"; }

  std::vector<float> embed(const std::vector<std::string>& texts,
                           std::chrono::steady_clock::time_point deadline) override {
    auto check = [deadline] {
      if (std::chrono::steady_clock::now() >= deadline) throw std::runtime_error("minilm: deadline exceeded");
    };
    check();
    // Scratch grows with the tokens of one pass (~14 KB each), so a huge batch runs as several
    // passes of about max_pass_tokens_; rows do not interact, so the result is the same.
    std::vector<float> out;
    out.reserve(texts.size() * dim());
    std::vector<std::vector<std::int32_t>> ids;
    std::size_t tokens = 0;
    auto run = [&] {
      const auto part = minilm_forward_checked(model_->weights(), &packed_, ids, check, pool_.get());
      out.insert(out.end(), part.begin(), part.end());
      ids.clear();
      tokens = 0;
    };
    for (const auto& text : texts) {
      ids.push_back(model_->tokenizer().encode(text, max_seq_));
      tokens += ids.back().size();
      if (tokens >= max_pass_tokens_) run();
    }
    if (!ids.empty()) run();
    return out;
  }


 private:
  std::shared_ptr<const MiniLMModel> model_;
  const std::vector<PackedMiniLMLayer> packed_;  // ~43 MB for MiniLM-L6; read-only, shared by all calls
  std::size_t max_seq_;
  std::size_t max_pass_tokens_;
  std::unique_ptr<IntraOpPool> pool_;  // null: every call runs on its own thread only
};

}  // namespace

std::unique_ptr<Embedder> make_minilm_embedder(std::shared_ptr<const MiniLMModel> model, const MiniLMOptions& options) {
  if (!model) throw std::invalid_argument("minilm: no model");
  if (options.blas_threads > 0) {
    static std::once_flag once;
    std::call_once(once, [n = options.blas_threads] { openblas_set_num_threads(n); });
  }
  const std::size_t model_max = model->weights().config.max_seq_length;
  std::size_t max_seq = options.max_seq_length == 0 ? model_max : std::min(options.max_seq_length, model_max);
  if (max_seq < 2) throw std::invalid_argument("minilm: max_seq_length must be at least 2");
  if (options.max_pass_tokens == 0) throw std::invalid_argument("minilm: max_pass_tokens must be positive");
  const DenseMath math = dense_math_for(options.precision, options.matrix_tiles, "minilm");
  if (options.intra_op_threads < 1) throw std::invalid_argument("minilm: intra_op_threads must be at least 1");
  return std::make_unique<MiniLMEmbedder>(std::move(model), math, max_seq, options.max_pass_tokens,
                                          static_cast<std::size_t>(options.intra_op_threads));
}

bool minilm_bf16_supported() { return cpu_has_bf16_dot(); }
bool minilm_matrix_tiles_supported() { return cpu_has_bf16_tiles(); }

MiniLMArithmetic minilm_arithmetic(const MiniLMOptions& options) {
  const DenseMath math = dense_math_for(options.precision, options.matrix_tiles, "minilm");
  return {math == DenseMath::kFp32 ? "fp32" : "bf16", math == DenseMath::kBf16Tiles};
}

DenseMath dense_math_for(MiniLMPrecision precision, bool matrix_tiles, const char* who) {
  switch (precision) {
    case MiniLMPrecision::kFp32:
      return DenseMath::kFp32;
    case MiniLMPrecision::kBf16:
      if (!cpu_has_bf16_dot())
        throw std::invalid_argument(std::string(who) + ": precision bf16 needs a CPU with AVX512-BF16; use auto or fp32");
      break;
    case MiniLMPrecision::kAuto:
      if (!cpu_has_bf16_dot()) return DenseMath::kFp32;
      break;
  }
  return matrix_tiles && cpu_has_bf16_tiles() ? DenseMath::kBf16Tiles : DenseMath::kBf16;
}

std::unique_ptr<Embedder> make_minilm_embedder(const std::string& model_dir, const MiniLMOptions& options) {
  return make_minilm_embedder(MiniLMModel::load(model_dir), options);
}

}  // namespace tidegate::encoder
