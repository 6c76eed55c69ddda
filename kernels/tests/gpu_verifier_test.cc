// The GPU pair verifier against the CPU verifier (fp32) on the shipped weights: the training
// script's fixture pairs (cache/verifier/model/fixtures.json) and hand-picked ones, batched and
// one by one, from concurrent callers, and a deadline that has passed.
// Tolerance: fp16 weights and activations (10 mantissa bits) round more finely than the CPU's
// bf16 path (7), whose parity tolerance against torch is 2e-2 in probability; the same bound is
// used here.
#include <boost/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gpu_test_util.h"

namespace tidegate::kernels {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kTolerance = 2e-2;

struct Loaded {
  std::shared_ptr<const encoder::PairVerifier> cpu;
  std::unique_ptr<encoder::PairScorer> gpu;
  std::string skip;
};

Loaded load() {
  Loaded l;
  const std::string root = TIDEGATE_SOURCE_ROOT;
  const std::string model_dir = root + "/" + encoder::kDefaultMiniLMDir;
  const std::string verifier_dir = root + "/cache/verifier/model";
  if (!std::filesystem::exists(model_dir + "/model.safetensors")) {
    l.skip = "model not unpacked at " + model_dir;
    return l;
  }
  if (!std::filesystem::exists(verifier_dir + "/" + encoder::PairVerifier::kWeightsFile)) {
    l.skip = "no trained verifier in " + verifier_dir;
    return l;
  }
  encoder::PairVerifierOptions o;
  o.precision = encoder::MiniLMPrecision::kFp32;
  l.cpu = encoder::PairVerifier::load(verifier_dir, encoder::MiniLMModel::load(model_dir), o);
  std::string why;
  l.gpu = make_gpu_pair_verifier(l.cpu, GpuVerifierOptions{}, &why);
  if (!l.gpu) l.skip = "gpu verifier not created: " + why;
  return l;
}

std::vector<std::pair<std::string, std::string>> fixture_pairs() {
  std::ifstream in(std::string(TIDEGATE_SOURCE_ROOT) + "/cache/verifier/model/fixtures.json");
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::pair<std::string, std::string>> out;
  if (text.str().empty()) return out;
  for (const auto& p : boost::json::parse(text.str()).as_object().at("pairs").as_array())
    out.emplace_back(std::string(p.at("a").as_string()), std::string(p.at("b").as_string()));
  return out;
}

TEST(GpuVerifier, MatchesTheCpuVerifierBatchedAndOneByOne) {
  TG_SKIP_WITHOUT_GPU();
  auto l = load();
  if (!l.gpu) GTEST_SKIP() << l.skip;
  EXPECT_EQ(l.gpu->name(), "pair-verifier-gpu");
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  auto pairs = fixture_pairs();
  ASSERT_GE(pairs.size(), 8u);
  std::string long_text;
  for (int i = 0; i < 80; ++i) long_text += "token" + std::to_string(i) + " ";
  pairs.emplace_back("How do I learn Python quickly?", "");
  pairs.emplace_back(long_text, "How can I learn Python fast?");
  double worst = 0;
  for (const auto& [a, b] : pairs) {
    const float want = l.cpu->verify(a, {b}, deadline)[0];
    const float got = l.gpu->verify(a, {b}, deadline)[0];
    worst = std::max(worst, std::abs(static_cast<double>(got) - want));
    EXPECT_NEAR(got, want, kTolerance) << a << " | " << b;
  }
  std::cout << "worst |p_gpu - p_cpu| over " << pairs.size() << " pairs: " << worst << "\n";
  // One query against several candidates (different lengths, so padding) in one call.
  const std::string query = "What is the fastest way to learn Python?";
  const std::vector<std::string> candidates = {"How do I learn Python quickly?", "What is the capital of France?",
                                               long_text, "", "How can I learn Python fast?"};
  const auto batch = l.gpu->verify(query, candidates, deadline);
  ASSERT_EQ(batch.size(), candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    EXPECT_NEAR(batch[i], l.gpu->verify(query, {candidates[i]}, deadline)[0], 2e-3) << candidates[i];
    EXPECT_NEAR(batch[i], l.cpu->verify(query, {candidates[i]}, deadline)[0], kTolerance) << candidates[i];
  }
  EXPECT_TRUE(l.gpu->verify(query, {}, deadline).empty());
}

TEST(GpuVerifier, ConcurrentLookupsShareBatchesAndKeepTheirOwnAnswers) {
  TG_SKIP_WITHOUT_GPU();
  auto l = load();
  if (!l.gpu) GTEST_SKIP() << l.skip;
  const auto pairs = fixture_pairs();
  ASSERT_GE(pairs.size(), 8u);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  std::vector<float> alone(pairs.size()), together(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) alone[i] = l.gpu->verify(pairs[i].first, {pairs[i].second}, deadline)[0];
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < pairs.size(); ++i)
    threads.emplace_back([&, i] { together[i] = l.gpu->verify(pairs[i].first, {pairs[i].second}, deadline)[0]; });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < pairs.size(); ++i) EXPECT_NEAR(together[i], alone[i], 2e-3) << pairs[i].first;
}

TEST(GpuVerifier, APassedDeadlineIsAnErrorNotAnAnswer) {
  TG_SKIP_WITHOUT_GPU();
  auto l = load();
  if (!l.gpu) GTEST_SKIP() << l.skip;
  try {
    l.gpu->verify("a question", {"another question"}, Clock::now() - std::chrono::seconds(1));
    ADD_FAILURE() << "a passed deadline gave an answer";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu verifier"), std::string::npos) << e.what();
  }
  // And the verifier still answers afterwards.
  EXPECT_EQ(l.gpu->verify("a question", {"another question"}, Clock::now() + std::chrono::seconds(30)).size(), 1u);
}

}  // namespace
}  // namespace tidegate::kernels
