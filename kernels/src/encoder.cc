// The MiniLM embedder on the GPU: the shared BERT forward pass (bert.h) with mean pooling, fed by
// a micro-batcher whose thread alone touches the stream.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "batcher.h"
#include "tidegate/common/log.h"
#include "tidegate/kernels/gpu.h"

#if TIDEGATE_KERNELS_WITH_MINILM
#include "bert.h"
#include "tidegate/encoder/minilm.h"
#endif

namespace tidegate::kernels {

#if TIDEGATE_KERNELS_WITH_MINILM
namespace {

class GpuMiniLMEmbedder final : public encoder::Embedder {
 public:
  GpuMiniLMEmbedder(std::shared_ptr<const encoder::MiniLMModel> model, const GpuEncoderOptions& options)
      : model_(std::move(model)),
        max_tokens_(options.max_seq_length ? std::min(options.max_seq_length, model_->weights().config.max_seq_length)
                                           : model_->weights().config.max_seq_length),
        engine_(std::make_unique<detail::GpuBert>(model_->weights())),
        batcher_(options.max_batch, std::chrono::microseconds(options.max_wait_us), engine_->hidden(),
                 [this](const std::vector<const detail::TokenIds*>& seqs) {
                   return engine_->mean_pooled(seqs, model_->tokenizer().pad_id());
                 }) {}

  std::size_t dim() const override { return engine_->hidden(); }
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
  const std::unique_ptr<detail::GpuBert> engine_;
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
