#include <cblas.h>

#include <mutex>
#include <stdexcept>

#include "minilm_internal.h"

namespace tidegate::cache {
namespace {

class MiniLMEmbedder final : public Embedder {
 public:
  MiniLMEmbedder(std::shared_ptr<const MiniLMModel> model, std::size_t max_seq, bool half)
      : model_(std::move(model)), packed_(pack_minilm(model_->weights(), half)), max_seq_(max_seq) {}

  std::size_t dim() const override { return model_->weights().config.hidden; }
  std::string name() const override { return "minilm"; }

  std::vector<float> embed(const std::vector<std::string>& texts,
                           std::chrono::steady_clock::time_point deadline) override {
    auto check = [deadline] {
      if (std::chrono::steady_clock::now() >= deadline) throw std::runtime_error("minilm: deadline exceeded");
    };
    check();
    std::vector<std::vector<std::int32_t>> ids;
    ids.reserve(texts.size());
    for (const auto& text : texts) ids.push_back(model_->tokenizer().encode(text, max_seq_));
    return minilm_forward_checked(model_->weights(), &packed_, ids, check);
  }

 private:
  std::shared_ptr<const MiniLMModel> model_;
  const std::vector<PackedMiniLMLayer> packed_;  // ~43 MB for MiniLM-L6; read-only, shared by all calls
  std::size_t max_seq_;
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
  return std::make_unique<MiniLMEmbedder>(std::move(model), max_seq, options.fp16_weights);
}

std::unique_ptr<Embedder> make_minilm_embedder(const std::string& model_dir, const MiniLMOptions& options) {
  return make_minilm_embedder(MiniLMModel::load(model_dir), options);
}

}  // namespace tidegate::cache
