// The pair verifier on the GPU: the CPU verifier's tensors on the shared BERT forward pass
// (bert.h), each pair with its token types, the [CLS] row through the linear head on the host.
// Concurrent lookups' pairs are gathered by a micro-batcher into one pass.
#include <memory>
#include <string>
#include <vector>

#include "batcher.h"
#include "tidegate/common/log.h"
#include "tidegate/kernels/gpu.h"

#if TIDEGATE_KERNELS_WITH_MINILM
#include "bert.h"
#endif

namespace tidegate::kernels {

#if TIDEGATE_KERNELS_WITH_MINILM
namespace {

class GpuPairVerifier final : public encoder::PairScorer {
 public:
  GpuPairVerifier(std::shared_ptr<const encoder::PairVerifier> cpu, const GpuVerifierOptions& options)
      : cpu_(std::move(cpu)),
        engine_(std::make_unique<detail::GpuBert>(cpu_->weights())),
        batcher_(options.max_batch, std::chrono::microseconds(options.max_wait_us), 1,
                 [this](const std::vector<const detail::TokenIds*>& seqs) { return probabilities(seqs); },
                 "gpu verifier") {}

  std::vector<float> verify(std::string_view query, const std::vector<std::string>& candidates,
                            std::chrono::steady_clock::time_point deadline) const override {
    if (candidates.empty()) return {};
    // Tokenising on the caller's thread keeps the batcher thread feeding the GPU only. The
    // types are derived from the ids on the batcher thread (pair_segments.h).
    std::vector<detail::TokenIds> seqs;
    seqs.reserve(candidates.size());
    for (const auto& c : candidates) seqs.push_back(cpu_->encode(query, c).ids);
    return batcher_.submit(std::move(seqs), deadline);
  }

  std::string name() const override { return "pair-verifier-gpu"; }

 private:
  // Runs on the batcher thread only.
  std::vector<float> probabilities(const std::vector<const detail::TokenIds*>& seqs) {
    const auto& tok = cpu_->base().tokenizer();
    const auto cls = engine_->first_rows_of_pairs(seqs, tok.pad_id(), tok.sep_id());
    const std::size_t h = engine_->hidden();
    std::vector<float> out(seqs.size());
    for (std::size_t i = 0; i < seqs.size(); ++i) out[i] = cpu_->probability_from_cls(cls.data() + i * h);
    return out;
  }

  const std::shared_ptr<const encoder::PairVerifier> cpu_;
  const std::unique_ptr<detail::GpuBert> engine_;
  mutable detail::MicroBatcher batcher_;  // last: its thread stops before the engine goes away
};

}  // namespace

std::unique_ptr<encoder::PairScorer> make_gpu_pair_verifier(std::shared_ptr<const encoder::PairVerifier> cpu,
                                                          const GpuVerifierOptions& options, std::string* why) {
  if (!cpu) {
    if (why) *why = "no pair verifier to upload";
    return nullptr;
  }
  if (!gpu_available(why)) return nullptr;
  try {
    auto v = std::make_unique<GpuPairVerifier>(cpu, options);
    log::info("gpu_verifier_ready", {{"weights", cpu->weights_path()}, {"layers", cpu->layers()},
                                     {"max_batch", options.max_batch}, {"max_wait_us", options.max_wait_us}});
    return v;
  } catch (const std::exception& ex) {
    if (why) *why = std::string("gpu verifier creation failed: ") + ex.what();
    return nullptr;
  }
}

#else  // the CPU encoder library (verifier loader, tokenizer) is not part of this build

std::unique_ptr<encoder::PairScorer> make_gpu_pair_verifier(std::shared_ptr<const encoder::PairVerifier>,
                                                          const GpuVerifierOptions&, std::string* why) {
  if (why) *why = "built without the MiniLM loader (tidegate_encoder target absent)";
  return nullptr;
}

#endif

}  // namespace tidegate::kernels
