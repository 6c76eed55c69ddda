// The tiers of a lookup (issue 19): exact text, candidates above the floor, the lexical guard,
// the pair verifier and its calibrated threshold, and failing open when the verifier fails.
// A scripted verifier stands in for the trained one (its own tests are in cache/encoder).
#include <map>
#include <mutex>

#include "cache_fixture.h"

using namespace tidegate::cache;
namespace encoder = tidegate::encoder;
using namespace tidegate::cache::fakes;

namespace {

using Clock = std::chrono::steady_clock;

// Probability by candidate text (default 0); can throw or be slow.
class ScriptedVerifier final : public encoder::PairScorer {
 public:
  std::vector<float> verify(std::string_view query, const std::vector<std::string>& candidates,
                            Clock::time_point deadline) const override {
    std::lock_guard lock(mu_);
    ++calls_;
    last_query_ = std::string(query);
    last_candidates_ = candidates;
    if (fail_) throw std::runtime_error("verifier down");
    if (delay_ms_ > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
      if (Clock::now() >= deadline) throw std::runtime_error("pair verifier: deadline exceeded");
    }
    std::vector<float> out;
    for (const auto& c : candidates) {
      const auto it = prob_.find(c);
      out.push_back(it == prob_.end() ? 0.f : it->second);
    }
    return out;
  }
  std::string name() const override { return "scripted"; }

  void set(const std::string& text, float p) {
    std::lock_guard lock(mu_);
    prob_[text] = p;
  }
  void fail(bool on) {
    std::lock_guard lock(mu_);
    fail_ = on;
  }
  void delay(int ms) {
    std::lock_guard lock(mu_);
    delay_ms_ = ms;
  }
  int calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  std::vector<std::string> last_candidates() const {
    std::lock_guard lock(mu_);
    return last_candidates_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, float> prob_;
  bool fail_ = false;
  int delay_ms_ = 0;
  mutable int calls_ = 0;
  mutable std::string last_query_;
  mutable std::vector<std::string> last_candidates_;
};

CacheConfig tiered_config(double probability_threshold = 0.9) {
  CacheConfig c;
  c.threshold = 0.99;
  c.lookup_timeout_s = 5;
  c.max_false_hit_rate = 0.05;
  Calibration cal;
  cal.ok = true;
  cal.threshold = probability_threshold;
  c.calibration = cal;
  c.verifier.floor = 0.5;  // the test embedder's similarities are lower than MiniLM's
  c.verifier.timeout_s = 0.5;
  return c;
}

const std::string kStored = "what is the capital of france";
const std::string kParaphrase = "what is the capital city of france";

}  // namespace

TEST(CacheTiers, ExactTierHitsWithoutEmbeddingOrVerifying) {
  auto v = std::make_shared<ScriptedVerifier>();
  CacheHarness h(tiered_config(), v);
  h.insert_and_wait(h.plan(chat_body("  What is the capital\tof France? ")), "Paris.");
  const auto calls = h.embedder->calls.load();
  const auto r = h.lookup(h.plan(chat_body("What is the capital of France?")));
  ASSERT_EQ(r.status, CacheStatus::kHit);
  EXPECT_EQ(r.answer.content, "Paris.");
  EXPECT_FLOAT_EQ(r.similarity, 1.f);
  EXPECT_EQ(h.embedder->calls.load(), calls);  // no embedding
  EXPECT_EQ(v->calls(), 0);
  EXPECT_EQ(h.counter("tidegate_cache_tier_total", "tier=exact"), 1);
  EXPECT_EQ(h.counter("tidegate_cache_lookups_total", "result=hit"), 1);
  // Case is kept: not an exact hit (the cosine/verifier tiers decide).
  EXPECT_EQ(h.lookup(h.plan(chat_body("WHAT IS THE CAPITAL OF FRANCE?"))).status, CacheStatus::kMiss);
  EXPECT_EQ(h.counter("tidegate_cache_tier_total", "tier=exact"), 1);
  // Another tenant never gets it.
  EXPECT_EQ(h.lookup(h.plan(chat_body("What is the capital of France?"), "t2")).status, CacheStatus::kMiss);
}

TEST(CacheTiers, ExactTierCanBeTurnedOff) {
  auto cfg = tiered_config();
  cfg.exact_tier = false;
  auto v = std::make_shared<ScriptedVerifier>();
  CacheHarness h(cfg, v);
  h.insert_and_wait(h.plan(chat_body(kStored)), "Paris.");
  EXPECT_EQ(h.lookup(h.plan(chat_body(kStored))).status, CacheStatus::kMiss);  // the verifier said 0
  EXPECT_EQ(v->calls(), 1);
  EXPECT_EQ(h.counter("tidegate_cache_tier_total", "tier=exact"), 0);
}

TEST(CacheTiers, VerifierProbabilityAgainstTheCalibratedThresholdDecides) {
  auto v = std::make_shared<ScriptedVerifier>();
  CacheHarness h(tiered_config(0.9), v);
  h.insert_and_wait(h.plan(chat_body(kStored)), "Paris.");
  v->set(kStored, 0.95f);
  auto r = h.lookup(h.plan(chat_body(kParaphrase)));
  ASSERT_EQ(r.status, CacheStatus::kHit);
  EXPECT_EQ(r.answer.content, "Paris.");
  EXPECT_NEAR(r.probability, 0.95f, 1e-5);
  EXPECT_LT(r.similarity, 0.99f);  // cosine alone (threshold 0.99) would have missed
  EXPECT_EQ(v->last_candidates(), std::vector<std::string>{kStored});
  v->set(kStored, 0.85f);
  r = h.lookup(h.plan(chat_body(kParaphrase)));
  EXPECT_EQ(r.status, CacheStatus::kMiss);
  EXPECT_NEAR(r.probability, 0.85f, 1e-5);
  EXPECT_EQ(h.counter("tidegate_cache_tier_total", "outcome=hit"), 1);
  EXPECT_EQ(h.counter("tidegate_cache_tier_total", "outcome=rejected"), 1);
  EXPECT_NE(h.metrics_text().find("tidegate_cache_tier_total{outcome=\"rejected\",tier=\"verifier\"} 1"),
            std::string::npos)
      << h.metrics_text();
  const auto stats = h.cache->stats().at("tiers").as_object();
  EXPECT_EQ(stats.at("verifier").as_string(), "scripted");
  EXPECT_EQ(stats.at("verified_hits").as_uint64(), 1u);
  EXPECT_DOUBLE_EQ(stats.at("probability_threshold").as_double(), 0.9);
}

TEST(CacheTiers, BestOfSeveralCandidatesIsServed) {
  auto v = std::make_shared<ScriptedVerifier>();
  CacheHarness h(tiered_config(0.9), v);
  h.insert_and_wait(h.plan(chat_body(kStored)), "Paris.");
  h.insert_and_wait(h.plan(chat_body("what is the capital of france today")), "Still Paris.");
  v->set(kStored, 0.91f);
  v->set("what is the capital of france today", 0.97f);
  const auto r = h.lookup(h.plan(chat_body(kParaphrase)));
  ASSERT_EQ(r.status, CacheStatus::kHit);
  EXPECT_EQ(r.answer.content, "Still Paris.");
  EXPECT_EQ(v->last_candidates().size(), 2u);  // both verified in one call
}

TEST(CacheTiers, FloorAndGuardComeBeforeTheVerifier) {
  auto v = std::make_shared<ScriptedVerifier>();
  CacheHarness h(tiered_config(0.5), v);
  h.insert_and_wait(h.plan(chat_body("how do I install visual studio 2008")), "Like this.");
  v->set("how do I install visual studio 2008", 1.f);
  // Numbers differ: the guard refuses, the verifier is not asked.
  EXPECT_EQ(h.lookup(h.plan(chat_body("how do I install visual studio 2010"))).status, CacheStatus::kMiss);
  EXPECT_EQ(v->calls(), 0);
  EXPECT_EQ(h.counter("tidegate_cache_tier_total", "tier=guard"), 1);
  // Unrelated: nothing above the floor.
  EXPECT_EQ(h.lookup(h.plan(chat_body("tell me a joke about cats"))).status, CacheStatus::kMiss);
  EXPECT_EQ(v->calls(), 0);
  EXPECT_EQ(h.counter("tidegate_cache_tier_total", "tier=candidates"), 1);
}

TEST(CacheTiers, AFailingOrSlowVerifierIsAMissNeverAHit) {
  auto v = std::make_shared<ScriptedVerifier>();
  CacheHarness h(tiered_config(0.5), v);
  h.insert_and_wait(h.plan(chat_body(kStored)), "Paris.");
  v->set(kStored, 1.f);
  v->fail(true);
  auto r = h.lookup(h.plan(chat_body(kParaphrase)));
  EXPECT_EQ(r.status, CacheStatus::kMiss);
  EXPECT_EQ(h.counter("tidegate_cache_tier_total", "outcome=error"), 1);
  v->fail(false);
  v->delay(1200);  // past verifier.timeout (500 ms), well within the lookup's 5 s
  r = h.lookup(h.plan(chat_body(kParaphrase)));
  EXPECT_EQ(r.status, CacheStatus::kMiss);
  EXPECT_EQ(h.counter("tidegate_cache_tier_total", "outcome=timeout"), 1);
  EXPECT_EQ(h.cache->stats().at("tiers").at("verifier_failures").as_uint64(), 2u);
  v->delay(0);
  EXPECT_EQ(h.lookup(h.plan(chat_body(kParaphrase))).status, CacheStatus::kHit);
}

TEST(CacheTiers, PoolsWithACosineThresholdKeepIt) {
  auto cfg = tiered_config(0.5);
  cfg.models["cosine"].threshold = 0.5;
  auto v = std::make_shared<ScriptedVerifier>();
  CacheHarness h(cfg, v);
  h.insert_and_wait(h.plan(chat_body(kStored), "t1", "cosine"), "Paris.");
  const auto r = h.lookup(h.plan(chat_body(kParaphrase), "t1", "cosine"));
  EXPECT_EQ(r.status, CacheStatus::kHit);
  EXPECT_EQ(v->calls(), 0);
  EXPECT_EQ(h.counter("tidegate_cache_tier_total", "tier=cosine"), 1);
}

TEST(CacheTiers, UnloadableVerifierFallsBackToCosineAndSaysWhy) {
  auto cfg = tiered_config(0.5);
  cfg.verifier.dir = "/nonexistent/verifier";
  cfg.threshold = 0.5;
  CacheHarness h(cfg);  // no verifier given: the cache loads it from cfg.verifier.dir, and fails
  h.insert_and_wait(h.plan(chat_body(kStored)), "Paris.");
  EXPECT_EQ(h.lookup(h.plan(chat_body(kParaphrase))).status, CacheStatus::kHit);  // cosine 0.5
  const auto tiers = h.cache->stats().at("tiers").as_object();
  EXPECT_EQ(tiers.at("verifier").as_string(), "unavailable");
  EXPECT_FALSE(tiers.at("verifier_problem").as_string().empty());
}

TEST(CacheTiers, LoadsTheShippedVerifier) {
  const std::string minilm = std::string(TIDEGATE_SOURCE_ROOT) + "/" + encoder::kDefaultMiniLMDir;
  const std::string dir = std::string(TIDEGATE_SOURCE_ROOT) + "/" + kDefaultVerifierDir;
  if (!std::filesystem::exists(minilm + "/model.safetensors"))
    GTEST_SKIP() << "MiniLM weights not installed (run scripts/setup.sh); looked in " << minilm;
  auto cfg = tiered_config(0.5);
  cfg.embedder.model_dir = minilm;
  cfg.verifier.dir = dir;
  cfg.verifier.timeout_s = 10;  // a loaded CI box must not turn this into a timeout
  cfg.verifier.device = EmbedderConfig::Device::kCpu;  // the GPU one: cache/tests/backend_test.cc
  CacheHarness h(cfg);  // the test embedder for vectors, the real verifier for pairs
  const auto tiers = h.cache->stats().at("tiers").as_object();
  ASSERT_EQ(tiers.at("verifier").as_string(), "pair-verifier") << boost::json::serialize(tiers);
  h.insert_and_wait(h.plan(chat_body(kStored)), "Paris.");
  const auto r = h.lookup(h.plan(chat_body(kParaphrase)));
  EXPECT_NE(r.status, CacheStatus::kBypass);
  EXPECT_GE(r.probability, 0.f);  // the verifier decided
  EXPECT_LE(r.probability, 1.f);
}
