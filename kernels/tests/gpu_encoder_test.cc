// The GPU encoder against the CPU encoder (cache/encoder) on the real all-MiniLM-L6-v2 weights.
// Tolerance: fp16 weights and activations keep each unit-length embedding within cosine 0.999
// of the fp32 CPU result and every component within 5e-3.
#include <cmath>
#include <filesystem>
#include <thread>

#include "gpu_test_util.h"

#if TIDEGATE_KERNELS_WITH_MINILM
#include "tidegate/encoder/minilm.h"
#endif

namespace tidegate::kernels {
namespace {

std::vector<std::string> sample_texts() {
  std::string long_text;
  for (int i = 0; i < 60; ++i) long_text += "the quick brown fox jumps over the lazy dog number " + std::to_string(i) + " ";
  return {"hello", "What is the capital of France?", "How do I reverse a linked list in C++?",
          "Explain the difference between TCP and UDP in two sentences, please.", long_text,
          "naïve café résumé — 東京 tokens", ""};
}

TEST(GpuEncoder, MatchesCpuEncoderAndIsBatchInvariant) {
  TG_SKIP_WITHOUT_GPU();
#if !TIDEGATE_KERNELS_WITH_MINILM
  GTEST_SKIP() << "built without tidegate_encoder (the MiniLM loader)";
#else
  const std::string dir = std::string(TIDEGATE_SOURCE_ROOT) + "/" + encoder::kDefaultMiniLMDir;
  if (!std::filesystem::exists(dir + "/model.safetensors")) GTEST_SKIP() << "model not unpacked at " << dir;
  std::string why;
  auto gpu = make_gpu_minilm_embedder(dir, GpuEncoderOptions{}, &why);
  ASSERT_NE(gpu, nullptr) << why;
  // The CPU encoder's own parity entry point (fp32) on the same token ids is the reference.
  const auto model = encoder::MiniLMModel::load(dir);
  EXPECT_EQ(gpu->dim(), model->weights().config.hidden);
  const auto texts = sample_texts();
  std::vector<std::vector<std::int32_t>> ids;
  for (const auto& t : texts) ids.push_back(model->tokenizer().encode(t, model->weights().config.max_seq_length));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const auto g = gpu->embed(texts, deadline);
  const auto c = encoder::minilm_forward(model->weights(), ids);
  ASSERT_EQ(g.size(), c.size());
  const std::size_t dim = gpu->dim();
  for (std::size_t t = 0; t < texts.size(); ++t) {
    double dotp = 0;
    for (std::size_t d = 0; d < dim; ++d) {
      dotp += g[t * dim + d] * c[t * dim + d];
      ASSERT_NEAR(g[t * dim + d], c[t * dim + d], 5e-3) << "text " << t << " dim " << d;
    }
    EXPECT_GT(dotp, 0.999) << "text " << t;
  }
  // The same text alone and batched with others (different padding) gives the same vector.
  std::vector<std::vector<float>> single(texts.size());
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < texts.size(); ++t)
    threads.emplace_back([&, t] { single[t] = gpu->embed({texts[t]}, deadline); });
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < texts.size(); ++t)
    for (std::size_t d = 0; d < dim; ++d) ASSERT_NEAR(single[t][d], g[t * dim + d], 2e-3) << "text " << t;
#endif
}

}  // namespace
}  // namespace tidegate::kernels
