// CPU-side parts of the GPU path: fp16 rounding, slot bookkeeping, the references themselves,
// the micro-batcher, and the no-GPU answers of the factories. Runs everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <thread>

#include "batcher.h"
#include "pair_segments.h"
#include "tidegate/kernels/gpu.h"
#include "tidegate/kernels/half.h"
#include "tidegate/kernels/reference.h"
#include "tidegate/kernels/slot_map.h"

namespace tidegate::kernels {
namespace {

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(1e6f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  // 1 + 2^-11 is exactly halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1.0).
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Smallest subnormal 2^-24, and half of it rounds to zero (even).
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Half, RoundTripsEveryFiniteHalf) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;  // inf / nan
    const float f = half_bits_to_float(static_cast<std::uint16_t>(h));
    ASSERT_EQ(float_to_half_bits(f), h) << std::hex << h;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  for (int i = 0; i < 10000; ++i) {
    const float f = u(rng);
    const float r = round_to_half(f);
    ASSERT_LE(std::fabs(r - f), std::fabs(f) * std::ldexp(1.0f, -11) + 1e-8f);
  }
}

TEST(SlotMap, ReusesLowestFreedSlotAndTracksIds) {
  SlotMap m;
  EXPECT_EQ(m.assign(10), 0u);
  EXPECT_EQ(m.assign(11), 1u);
  EXPECT_EQ(m.assign(12), 2u);
  EXPECT_EQ(m.assign(13), 3u);
  EXPECT_FALSE(m.assign(11).has_value());
  EXPECT_EQ(m.release(13), 3u);
  EXPECT_EQ(m.release(11), 1u);
  EXPECT_FALSE(m.release(11).has_value());
  EXPECT_EQ(m.id_at(1), -1);
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.used_slots(), 4u);
  EXPECT_EQ(m.assign(20), 1u);  // lowest free first
  EXPECT_EQ(m.assign(21), 3u);
  EXPECT_EQ(m.assign(22), 4u);  // free list empty: grows
  EXPECT_EQ(m.id_at(1), 20);
  EXPECT_EQ(m.slot_of(21), 3u);
  EXPECT_FALSE(m.slot_of(13).has_value());
  EXPECT_EQ(m.id_at(99), -1);
}

TEST(Reference, FlatTopKMatchesBruteForceOrderingWithTies) {
  const std::size_t dim = 8;
  // Rows: e0 scaled; several equal scores to exercise tie order (smaller id first).
  std::vector<float> rows = {
      1, 0, 0, 0, 0, 0, 0, 0,  //
      0.5, 0, 0, 0, 0, 0, 0, 0,  //
      1, 0, 0, 0, 0, 0, 0, 0,  //
      -1, 0, 0, 0, 0, 0, 0, 0,
  };
  const std::vector<std::int64_t> ids = {40, 30, 7, 5};
  const std::vector<float> q = {1, 0, 0, 0, 0, 0, 0, 0};
  auto hits = ref::flat_topk(rows.data(), ids.data(), 4, dim, q.data(), 1, 6);
  ASSERT_EQ(hits.size(), 6u);
  EXPECT_EQ(hits[0].id, 7);
  EXPECT_EQ(hits[1].id, 40);
  EXPECT_EQ(hits[2].id, 30);
  EXPECT_FLOAT_EQ(hits[2].score, 0.5f);
  EXPECT_EQ(hits[3].id, 5);
  EXPECT_EQ(hits[4].id, -1);  // fewer rows than k
  EXPECT_EQ(hits[5].id, -1);
}

TEST(Reference, LayerNormGeluSoftmaxPooling) {
  const std::vector<float> x = {1, 2, 3, 4}, res = {1, 1, 1, 1}, bias = {0, 0, 0, 4}, g = {1, 1, 1, 1},
                           b = {0, 0, 0, 0};
  std::vector<float> out(4);
  ref::residual_layernorm(x.data(), bias.data(), res.data(), g.data(), b.data(), 1, 4, 1e-12f, out.data());
  // x + bias + res = {2, 3, 4, 9}: mean 4.5, var 7.25.
  EXPECT_NEAR(out[0], (2 - 4.5) / std::sqrt(7.25), 1e-6);
  EXPECT_NEAR(out[3], (9 - 4.5) / std::sqrt(7.25), 1e-6);

  EXPECT_NEAR(ref::gelu_erf(1.0f), 0.8413447f, 1e-6);
  EXPECT_NEAR(ref::gelu_erf(-3.0f), -0.0040496f, 1e-6);

  // batch 2, 1 head, len 3; the second item has 2 valid keys.
  std::vector<float> s = {0, 0, 0, 1, 2, 3, 0, 0, 0, 5, 5, 100, 1, 1, 1, 0, 0, 0};
  const std::int32_t lengths[] = {3, 2};
  ref::masked_softmax(s.data(), 2, 1, 3, lengths, 1.0f);
  EXPECT_NEAR(s[0], 1.0 / 3, 1e-6);
  EXPECT_NEAR(s[3] + s[4] + s[5], 1.0, 1e-6);
  EXPECT_NEAR(s[9], 0.5, 1e-6);
  EXPECT_EQ(s[11], 0.f);  // masked key, however large its score
  EXPECT_NEAR(s[12] + s[13], 1.0, 1e-6);

  // batch 1, len 3 (2 valid), h 2: mean of (3,0) and (1,0) = (2,0) -> (1,0); the pad row is ignored.
  const std::vector<float> hidden = {3, 0, 1, 0, 100, 100};
  const std::int32_t len1[] = {2};
  std::vector<float> pooled(2);
  ref::mean_pool_l2(hidden.data(), 1, 3, 2, len1, pooled.data());
  EXPECT_NEAR(pooled[0], 1.0, 1e-6);
  EXPECT_NEAR(pooled[1], 0.0, 1e-6);
}

using detail::MicroBatcher;
using detail::TokenIds;
using Clock = std::chrono::steady_clock;

// Run function standing in for the forward pass: row = (first token, batch size seen).
MicroBatcher::RunFn recording_run(std::atomic<int>* calls) {
  return [calls](const std::vector<const TokenIds*>& seqs) {
    ++*calls;
    std::vector<float> out;
    for (const auto* s : seqs) {
      out.push_back(static_cast<float>(s->front()));
      out.push_back(static_cast<float>(seqs.size()));
    }
    return out;
  };
}

TEST(MicroBatcher, GathersConcurrentCallsIntoOneBatch) {
  std::atomic<int> calls{0};
  // A long window: only reaching max_batch (4) can release the batch early.
  MicroBatcher b(4, std::chrono::seconds(5), 2, recording_run(&calls));
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> results(4);
  const auto start = Clock::now();
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] { results[i] = b.submit({TokenIds{i + 100}}, Clock::now() + std::chrono::seconds(20)); });
  for (auto& t : threads) t.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(4));  // released by size, not the window
  EXPECT_EQ(calls.load(), 1);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(results[i].size(), 2u);
    EXPECT_EQ(results[i][0], static_cast<float>(i + 100));  // each caller gets its own row
    EXPECT_EQ(results[i][1], 4.f);
  }
  EXPECT_EQ(b.stats().batches, 1u);
  EXPECT_EQ(b.stats().sequences, 4u);
}

TEST(MicroBatcher, WindowReleasesASmallBatchAndLargeCallsAreChunked) {
  std::atomic<int> calls{0};
  MicroBatcher b(4, std::chrono::microseconds(300), 2, recording_run(&calls));
  auto one = b.submit({TokenIds{1}}, Clock::now() + std::chrono::seconds(20));
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[1], 1.f);
  std::vector<TokenIds> ten;
  for (int i = 0; i < 10; ++i) ten.push_back(TokenIds{i});
  auto rows = b.submit(ten, Clock::now() + std::chrono::seconds(20));
  ASSERT_EQ(rows.size(), 20u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(rows[2 * i], static_cast<float>(i));
  EXPECT_EQ(rows[1], 4.f);   // first chunk full
  EXPECT_EQ(rows[19], 2.f);  // last chunk holds the remaining 2
  EXPECT_EQ(calls.load(), 4);
}

TEST(MicroBatcher, DeadlinesAndFailuresReachTheCaller) {
  MicroBatcher slow(8, std::chrono::microseconds(100), 1, [](const std::vector<const TokenIds*>& seqs) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return std::vector<float>(seqs.size(), 1.f);
  });
  EXPECT_THROW(slow.submit({TokenIds{1}}, Clock::now() + std::chrono::milliseconds(50)), std::runtime_error);
  EXPECT_THROW(slow.submit({TokenIds{1}}, Clock::now() - std::chrono::milliseconds(1)), std::runtime_error);

  MicroBatcher failing(8, std::chrono::microseconds(100), 1,
                       [](const std::vector<const TokenIds*>&) -> std::vector<float> { throw std::runtime_error("boom"); });
  try {
    failing.submit({TokenIds{1}}, Clock::now() + std::chrono::seconds(20));
    FAIL() << "expected the run failure";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom");
  }
}

// A CPU index: the timing hooks must recognise it as not gpu-flat.
class ListIndex final : public encoder::VectorIndex {
 public:
  std::size_t dim() const override { return 8; }
  std::size_t size() const override { return 0; }
  void add(std::size_t, const float*, const std::int64_t*) override {}
  bool remove(std::int64_t) override { return false; }
  std::vector<encoder::SearchHit> search(std::size_t nq, const float*, std::size_t k) const override {
    return std::vector<encoder::SearchHit>(nq * k);
  }
};

TEST(Factories, TimingHooksIgnoreOtherIndexes) {
  ListIndex index;
  EXPECT_FALSE(enable_gpu_flat_kernel_timing(index));
  EXPECT_FALSE(gpu_flat_last_kernel_ms(index).has_value());
}

TEST(Factories, AnswerNullWithAReasonWhenTheGpuPathCannotRun) {
  std::string why;
  EXPECT_EQ(make_gpu_flat_index(12, &why), nullptr);  // not a multiple of 8, GPU or not
  EXPECT_FALSE(why.empty());
  why.clear();
  if (gpu_available(&why)) GTEST_SKIP() << "a GPU is present; the device tests cover the success path";
  EXPECT_FALSE(why.empty());
  std::string why_index, why_encoder;
  EXPECT_EQ(make_gpu_flat_index(384, &why_index), nullptr);
  EXPECT_FALSE(why_index.empty());
  EXPECT_EQ(make_gpu_minilm_embedder("/nonexistent", GpuEncoderOptions{}, &why_encoder), nullptr);
  EXPECT_FALSE(why_encoder.empty());
  std::string why_verifier;
  EXPECT_EQ(make_gpu_pair_verifier(nullptr, GpuVerifierOptions{}, &why_verifier), nullptr);
  EXPECT_FALSE(why_verifier.empty());
  std::cout << "no GPU here: " << why << "\n";
}

// The GPU verifier derives each pair's token types from its ids (the batcher carries ids only);
// the rule must give exactly what the CPU verifier's encode() assigns, including for texts that
// spell a special token, which the tokenizer splits into ordinary pieces.
TEST(PairSegments, DerivedTypesAreThoseOfTheCpuVerifiersEncoding) {
  const std::string root = TIDEGATE_SOURCE_ROOT;
  const std::string model_dir = root + "/" + encoder::kDefaultMiniLMDir;
  const std::string verifier_dir = root + "/cache/verifier/model";
  if (!std::filesystem::exists(model_dir + "/model.safetensors")) GTEST_SKIP() << "model not unpacked at " << model_dir;
  if (!std::filesystem::exists(verifier_dir + "/" + encoder::PairVerifier::kWeightsFile))
    GTEST_SKIP() << "no trained verifier in " << verifier_dir;
  const auto v = encoder::PairVerifier::load(verifier_dir, encoder::MiniLMModel::load(model_dir));
  const std::int32_t sep = v->base().tokenizer().sep_id();
  std::string long_text;
  for (int i = 0; i < 80; ++i) long_text += "word" + std::to_string(i) + " ";
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"How do I learn Python?", "What is the best way to learn Python?"},
      {"", ""},
      {"a [SEP] b", "[SEP] [CLS] [PAD]"},
      {long_text, "short"},
      {"short", long_text},
      {long_text, long_text}};
  for (const auto& [a, b] : pairs) {
    const auto t = v->encode(a, b);
    std::vector<std::int32_t> derived(t.ids.size(), -1);
    detail::pair_segment_types(t.ids.data(), t.ids.size(), sep, derived.data());
    EXPECT_EQ(derived, t.types) << a.substr(0, 40) << " | " << b.substr(0, 40);
    EXPECT_EQ(std::count(t.ids.begin(), t.ids.end(), sep), 2) << "the pair holds exactly its two separators";
  }
}

}  // namespace
}  // namespace tidegate::kernels
