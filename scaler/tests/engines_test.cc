// Each engine's /metrics as it serves it today (scaler/tests/fixtures/*.prom, reconstructed from
// the engines' sources) through the real parser: which signals the scaler finds, and what it
// says, again and again, when a configured target's signal is not there.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "tidegate/scaler/sampler.h"
#include "tidegate/scaler/signals.h"

namespace tidegate::scaler {
namespace {

std::string fixture(const std::string& name) {
  const std::string path = std::string(TIDEGATE_SOURCE_ROOT) + "/scaler/tests/fixtures/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

EngineMetrics parse(const std::string& name) { return extract_engine_metrics(parse_prometheus_text(fixture(name))); }

TEST(EngineFixtures, VllmV1) {
  const auto m = parse("vllm.prom");
  EXPECT_EQ(m.engine, "vllm");
  EXPECT_EQ(m.waiting, 3);
  EXPECT_EQ(m.running, 7);
  ASSERT_TRUE(m.kv_usage);
  EXPECT_DOUBLE_EQ(*m.kv_usage, 0.4215);
  // The token counters, not their _created timestamps.
  EXPECT_EQ(m.prefix_queries_total, 1.84e6);
  EXPECT_EQ(m.prefix_hits_total, 920000);
  EXPECT_FALSE(m.prefix_hit_rate);
  EXPECT_EQ(m.prefix_resolution, 0);
}

TEST(EngineFixtures, VllmDataParallelSumsQueuesAndAveragesKv) {
  const auto m = extract_engine_metrics(parse_prometheus_text(
      "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 2.0\n"
      "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 5.0\n"
      "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.2\n"
      "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.6\n"));
  EXPECT_EQ(m.waiting, 7);
  EXPECT_DOUBLE_EQ(*m.kv_usage, 0.4);
}

TEST(EngineFixtures, SgLang) {
  const auto m = parse("sglang.prom");
  EXPECT_EQ(m.engine, "sglang");
  EXPECT_EQ(m.waiting, 5);
  EXPECT_EQ(m.running, 12);
  ASSERT_TRUE(m.kv_usage);
  EXPECT_DOUBLE_EQ(*m.kv_usage, 0.37);
  // Cached tokens out of whole prompts (counters), with the per-batch gauge as a fallback.
  EXPECT_EQ(m.prefix_queries_total, 2.4e6);
  EXPECT_EQ(m.prefix_hits_total, 1.44e6);
  EXPECT_DOUBLE_EQ(*m.prefix_hit_rate, 0.61);
}

TEST(EngineFixtures, TgiHasNoKvAndNoPrefixCache) {
  const auto m = parse("tgi.prom");
  EXPECT_EQ(m.engine, "tgi");
  EXPECT_EQ(m.waiting, 4);
  EXPECT_EQ(m.running, 9);
  EXPECT_FALSE(m.kv_usage);
  EXPECT_FALSE(m.prefix_queries_total || m.prefix_hits_total || m.prefix_hit_rate);
}

TEST(EngineFixtures, LlamaServerHasNoKvButCountsCachedPromptTokens) {
  const auto m = parse("llamacpp.prom");
  EXPECT_EQ(m.engine, "llamacpp");
  EXPECT_EQ(m.waiting, 2);  // requests_deferred
  EXPECT_EQ(m.running, 4);  // requests_processing
  EXPECT_FALSE(m.kv_usage) << "kv_cache_usage_ratio and kv_cache_tokens are gone";
  // prompt_tokens_total excludes the cached ones: looked up = processed + cached.
  EXPECT_EQ(m.prefix_hits_total, 411523);
  EXPECT_EQ(m.prefix_queries_total, 1234570 + 411523);
  EXPECT_EQ(m.prefix_resolution, 10) << "1.23457e+06: six significant digits";
  // A build without the cached-token counter has no prefix cache signal.
  const auto old = extract_engine_metrics(
      parse_prometheus_text("llamacpp:prompt_tokens_total 900\nllamacpp:requests_processing 1\n"));
  EXPECT_FALSE(old.prefix_queries_total || old.prefix_hits_total);
}

// The sampler over one replica serving `body`, with targets on queue and KV usage.
struct Engine {
  std::string body;
  SignalSampler sampler;
  explicit Engine(std::string b)
      : body(std::move(b)), sampler(config(), [this](const std::string&) { return std::optional(body); }) {}
  static SamplerConfig config() {
    SamplerConfig c;
    c.model = "m";
    c.nvml = false;
    c.kv_tokens_per_replica = 100000;
    c.needed_by = {{"kv_usage", {"policy.targets.kv_usage"}}, {"queue", {"policy.targets.queue_per_replica"}}};
    c.missing_warn_every_s = 300;
    return c;
  }
  Signals at(double t) { return sampler.sample(t, nullptr, {{"10.0.0.1", 8080}}); }
};

TEST(EngineFixtures, EveryEngineGivesQueueAndConcurrency) {
  for (const char* f : {"vllm.prom", "sglang.prom", "tgi.prom", "llamacpp.prom"}) {
    Engine e(fixture(f));
    const auto s = e.at(0);
    EXPECT_TRUE(s.queue && s.concurrency) << f;
    EXPECT_EQ(e.sampler.missing().count("engine.waiting") + e.sampler.missing().count("engine.running"), 0u) << f;
    EXPECT_EQ(e.sampler.missing().count("queue"), 0u) << f;
    const bool has_kv = std::string(f) == "vllm.prom" || std::string(f) == "sglang.prom";
    EXPECT_EQ(s.kv_usage.has_value(), has_kv) << f;
    EXPECT_EQ(e.sampler.missing().count("kv_usage"), has_kv ? 0u : 1u) << f;
    EXPECT_EQ(e.sampler.missing().count("engine.prefix_cache"), std::string(f) == "tgi.prom" ? 1u : 0u) << f;
  }
}

TEST(EngineFixtures, AKvTargetOnLlamaServerWarnsWhileItLasts) {
  Engine e(fixture("llamacpp.prom"));
  for (double t = 0; t <= 900; t += 1) e.at(t);
  const auto& m = e.sampler.missing().at("kv_usage");
  EXPECT_EQ(m.needed_by, std::vector<std::string>{"policy.targets.kv_usage"});
  EXPECT_NE(m.detail.find("policy.targets.kv_usage has no effect"), std::string::npos) << m.detail;
  EXPECT_NE(m.detail.find("llama-server exports none"), std::string::npos) << m.detail;
  EXPECT_EQ(m.samples, 901u);
  EXPECT_DOUBLE_EQ(m.since, 0);
  EXPECT_EQ(m.warnings, 4u) << "at 0, 300, 600 and 900 s";
  // The engine-level record says it once: nothing configured depends on it by that name.
  const auto& engine_kv = e.sampler.missing().at("engine.kv_usage");
  EXPECT_EQ(engine_kv.warnings, 1u);
  EXPECT_NE(engine_kv.detail.find("capacity.kv_tokens"), std::string::npos) << engine_kv.detail;

  // The engine is swapped for one with a KV metric: both records go.
  e.body = fixture("vllm.prom");
  EXPECT_TRUE(e.at(901).kv_usage);
  EXPECT_EQ(e.sampler.missing().count("kv_usage"), 0u);
  EXPECT_EQ(e.sampler.missing().count("engine.kv_usage"), 0u);
}

TEST(EngineFixtures, NoReplicaToAskIsNotMissing) {
  Engine e(fixture("tgi.prom"));
  for (double t = 0; t < 5; ++t) e.sampler.sample(t, nullptr, {});
  EXPECT_TRUE(e.sampler.missing().empty()) << "scaled to zero: nothing was there to ask";
}

TEST(EngineFixtures, LlamaServerPrefixRatioWaitsForMoreThanItsPrintedPrecision) {
  auto body = [](const char* processed, const char* cached) {
    return std::string("llamacpp:requests_processing 1\nllamacpp:requests_deferred 0\nllamacpp:prompt_tokens_total ") +
           processed + "\nllamacpp:prompt_tokens_cached_total " + cached + "\n";
  };
  Engine e(body("1.23457e+06", "411523"));
  EXPECT_FALSE(e.at(0).prefix_hit_ratio);
  // +30 processed, +60 cached: under 50 steps of 10 tokens, too coarse to tell.
  e.body = body("1.2346e+06", "411583");
  EXPECT_FALSE(e.at(1).prefix_hit_ratio);
  // Much later: +1430 processed (1.23457e6 -> 1.236e6), +570 cached, from the first baseline.
  e.body = body("1.236e+06", "412093");
  const auto r = e.at(2).prefix_hit_ratio;
  ASSERT_TRUE(r);
  EXPECT_NEAR(*r, 570.0 / 2000.0, 1e-9);
}

}  // namespace
}  // namespace tidegate::scaler
