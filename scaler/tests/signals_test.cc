// Prometheus text parsing, engine metric names, DCGM, NVML absence, and the sampler that
// merges gateway and engine views.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tidegate/scaler/sampler.h"
#include "tidegate/scaler/signals.h"

namespace tidegate::scaler {
namespace {

constexpr const char* kVllm = R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="llama"} 7.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="llama"} 3.0
vllm:kv_cache_usage_perc{engine="0",model_name="llama"} 0.42
vllm:prompt_tokens_total{model_name="llama"} 1.2e+06 1700000000000
)";

TEST(PromText, ParsesNamesLabelsValuesAndSkipsJunk) {
  const auto s = parse_prometheus_text(
      "# comment\n"
      "plain 1\n"
      "with_labels{a=\"x\",b=\"q\\\"uote\"} 2.5\r\n"
      "spaced { a = \"1\" } -3e2\n"
      "broken{a=\"x\" 4\n"
      "nan_metric NaN\n"
      "inf_metric +Inf\n"
      "no_value\n"
      "\n");
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].name, "plain");
  EXPECT_EQ(s[0].value, 1);
  EXPECT_EQ(s[1].labels.at("a"), "x");
  EXPECT_EQ(s[1].labels.at("b"), "q\"uote");
  EXPECT_EQ(s[1].value, 2.5);
  EXPECT_EQ(s[2].labels.at("a"), "1");
  EXPECT_EQ(s[2].value, -300);
  EXPECT_TRUE(std::isnan(s[3].value));
  EXPECT_TRUE(std::isinf(s[4].value));
}

TEST(EngineMetrics, Vllm) {
  const auto m = extract_engine_metrics(parse_prometheus_text(kVllm));
  EXPECT_EQ(m.engine, "vllm");
  EXPECT_EQ(m.waiting, 3);
  EXPECT_EQ(m.running, 7);
  EXPECT_DOUBLE_EQ(*m.kv_usage, 0.42);
}

TEST(EngineMetrics, OlderVllmNameTgiAndLlamaCpp) {
  auto m = extract_engine_metrics(parse_prometheus_text("vllm:gpu_cache_usage_perc{model_name=\"x\"} 0.9\n"));
  EXPECT_DOUBLE_EQ(*m.kv_usage, 0.9);
  EXPECT_FALSE(m.waiting);
  m = extract_engine_metrics(parse_prometheus_text("tgi_queue_size 12\ntgi_batch_current_size 4\n"));
  EXPECT_EQ(m.engine, "tgi");
  EXPECT_EQ(m.waiting, 12);
  EXPECT_EQ(m.running, 4);
  m = extract_engine_metrics(parse_prometheus_text("llamacpp:requests_deferred 2\nllamacpp:requests_processing 1\n"));
  EXPECT_EQ(m.engine, "llamacpp");
  EXPECT_EQ(m.waiting, 2);
  EXPECT_EQ(m.running, 1);
  m = extract_engine_metrics(parse_prometheus_text("something_else 1\n"));
  EXPECT_EQ(m.engine, "");
  EXPECT_FALSE(m.waiting || m.running || m.kv_usage);
}

TEST(Dcgm, MeanUtilisationOverSelectedGpus) {
  const auto s = parse_prometheus_text(
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"h\"} 80\n"
      "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-b\",Hostname=\"h\"} 40\n"
      "DCGM_FI_DEV_FB_USED{gpu=\"0\"} 1000\n");
  EXPECT_DOUBLE_EQ(*dcgm_gpu_util(s, {}), 0.6);
  EXPECT_DOUBLE_EQ(*dcgm_gpu_util(s, {1}), 0.4);
  EXPECT_FALSE(dcgm_gpu_util(s, {7}));
  EXPECT_FALSE(dcgm_gpu_util(parse_prometheus_text("x 1\n"), {}));
}

TEST(Nvml, DegradesCleanlyWithoutADriver) {
  NvmlGpuUtil nvml;
  if (nvml.available()) {
    const auto u = nvml.utilisation({});
    ASSERT_TRUE(u);
    EXPECT_GE(*u, 0.0);
    EXPECT_LE(*u, 1.0);
  } else {
    EXPECT_FALSE(nvml.why_unavailable().empty());
    EXPECT_FALSE(nvml.utilisation({}));
  }
}

class FixedSource final : public SignalSource {
 public:
  GatewaySignals value;
  GatewaySignals sample(const std::string& model) const override {
    EXPECT_EQ(model, "llama");
    return value;
  }
};

TEST(Sampler, MergesGatewayAndEnginesAndTracksWhatIsMissing) {
  std::map<std::string, std::string> bodies{
      {"http://10.0.0.1:8000/metrics", kVllm},
      {"http://10.0.0.2:8000/metrics", "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n"},
      {"http://dcgm:9400/metrics", "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 50\n"}};
  int fetches = 0;
  Fetcher fetch = [&](const std::string& url) -> std::optional<std::string> {
    ++fetches;
    const auto it = bodies.find(url);
    if (it == bodies.end()) return std::nullopt;
    return it->second;
  };
  SamplerConfig cfg;
  cfg.model = "llama";
  cfg.dcgm_url = "http://dcgm:9400/metrics";
  SignalSampler sampler(cfg, fetch);
  FixedSource gw;
  gw.value.queue_depth = 5;
  gw.value.in_flight = 4;
  SampleDetail d;
  const auto s = sampler.sample(0, &gw, {{"10.0.0.1", 8000}, {"10.0.0.2", 8000}}, &d);
  EXPECT_EQ(d.engines_scraped, 2);
  // Engines: 3 waiting + 8 running = 11 > gateway 5 + 4: the larger view wins.
  EXPECT_EQ(s.concurrency, 11);
  EXPECT_EQ(s.queue, 5 + 3);
  EXPECT_DOUBLE_EQ(*s.kv_usage, 0.42) << "mean over replicas that report it";
  EXPECT_DOUBLE_EQ(*s.gpu_util, 0.5);
  EXPECT_EQ(d.gpu_source, "dcgm");

  // An engine upgrade renames a metric: reported once, the policy keeps the rest.
  bodies["http://10.0.0.1:8000/metrics"] = "vllm:num_requests_running 2\n";
  bodies["http://10.0.0.2:8000/metrics"] = "vllm:num_requests_running 2\n";
  for (int i = 0; i < 3; ++i) {
    const auto s2 = sampler.sample(0, &gw, {{"10.0.0.1", 8000}, {"10.0.0.2", 8000}});
    EXPECT_EQ(s2.concurrency, 9);  // gateway 9 > engines 4
    EXPECT_EQ(s2.queue, 5);
    EXPECT_FALSE(s2.kv_usage);
  }
  EXPECT_EQ(sampler.missing().count("engine.waiting"), 1u);
  EXPECT_EQ(sampler.missing().count("engine.kv_usage"), 1u);
  EXPECT_EQ(sampler.missing().count("engine.running"), 0u);
  EXPECT_EQ(sampler.missing().at("engine.waiting").samples, 3u);
  EXPECT_EQ(sampler.missing().at("engine.waiting").warnings, 1u) << "nothing configured needs it: logged once";
}

TEST(Sampler, PrefixCountersStartAfreshWhenTheReplicaSetChanges) {
  std::map<std::string, std::string> bodies;
  auto engine = [](double queries, double hits) {
    return "vllm:num_requests_running 1\nvllm:prefix_cache_queries_total " + std::to_string(queries) +
           "\nvllm:prefix_cache_hits_total " + std::to_string(hits) + "\n";
  };
  bodies["http://a:1/metrics"] = engine(1000, 0);
  Fetcher fetch = [&](const std::string& url) -> std::optional<std::string> { return bodies.at(url); };
  SamplerConfig cfg;
  cfg.model = "llama";
  cfg.nvml = false;
  SignalSampler sampler(cfg, fetch);
  sampler.sample(0, nullptr, {{"a", 1}});
  // A replica joins with a long history of hits: its counters are not this interval's traffic.
  bodies["http://b:1/metrics"] = engine(900000, 800000);
  bodies["http://a:1/metrics"] = engine(2000, 0);
  EXPECT_FALSE(sampler.sample(1, nullptr, {{"a", 1}, {"b", 1}}).prefix_hit_ratio);
  bodies["http://a:1/metrics"] = engine(3000, 0);
  bodies["http://b:1/metrics"] = engine(901000, 801000);
  EXPECT_DOUBLE_EQ(*sampler.sample(2, nullptr, {{"a", 1}, {"b", 1}}).prefix_hit_ratio, 0.5);
  // vLLM 0.8/0.9 names count too.
  const auto m = extract_engine_metrics(parse_prometheus_text(
      "vllm:gpu_prefix_cache_queries_total{model_name=\"x\"} 10\nvllm:gpu_prefix_cache_hits_total{model_name=\"x\"} 4\n"));
  EXPECT_EQ(m.prefix_queries_total, 10);
  EXPECT_EQ(m.prefix_hits_total, 4);
}

TEST(Sampler, PrefixHitRatioPerReplicaForRoutingDashboards) {
  std::map<std::string, std::string> bodies;
  auto engine = [](double queries, double hits) {
    return "vllm:prefix_cache_queries_total " + std::to_string(queries) + "\nvllm:prefix_cache_hits_total " +
           std::to_string(hits) + "\n";
  };
  Fetcher fetch = [&](const std::string& url) -> std::optional<std::string> { return bodies.at(url); };
  SamplerConfig cfg;
  cfg.model = "llama";
  cfg.nvml = false;
  SignalSampler sampler(cfg, fetch);
  SampleDetail d;
  bodies["http://a:1/metrics"] = engine(1000, 100);
  bodies["http://b:1/metrics"] = engine(5000, 0);
  sampler.sample(0, nullptr, {{"a", 1}, {"b", 1}}, &d);
  EXPECT_TRUE(d.prefix_hit_ratio_by_replica.empty());  // one reading is no interval yet
  bodies["http://a:1/metrics"] = engine(2000, 900);   // 800 of 1000 cached
  bodies["http://b:1/metrics"] = engine(5010, 5);     // 10 tokens: too few to tell
  d = {};
  sampler.sample(1, nullptr, {{"a", 1}, {"b", 1}}, &d);
  EXPECT_DOUBLE_EQ(d.prefix_hit_ratio_by_replica.at("a:1"), 0.8);
  EXPECT_EQ(d.prefix_hit_ratio_by_replica.count("b:1"), 0u);
  // b restarts (counters down: starts afresh), a keeps its last ratio while idle; then a leaves.
  bodies["http://b:1/metrics"] = engine(100, 0);
  d = {};
  sampler.sample(2, nullptr, {{"a", 1}, {"b", 1}}, &d);
  EXPECT_DOUBLE_EQ(d.prefix_hit_ratio_by_replica.at("a:1"), 0.8);
  EXPECT_EQ(d.prefix_hit_ratio_by_replica.count("b:1"), 0u);
  bodies["http://b:1/metrics"] = engine(1100, 250);
  d = {};
  sampler.sample(3, nullptr, {{"b", 1}}, &d);
  EXPECT_EQ(d.prefix_hit_ratio_by_replica.count("a:1"), 0u);
  EXPECT_DOUBLE_EQ(d.prefix_hit_ratio_by_replica.at("b:1"), 0.25);
}

TEST(Sampler, WorkSignalsAreDifferencedAndTtftReadAtTheSlo) {
  std::map<std::string, std::string> bodies;
  auto engine = [](double queries, double hits) {
    return "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0.5\n"
           "vllm:prefix_cache_queries_total " + std::to_string(queries) + "\nvllm:prefix_cache_hits_total " +
           std::to_string(hits) + "\n";
  };
  bodies["http://10.0.0.1:8000/metrics"] = engine(1000, 100);
  Fetcher fetch = [&](const std::string& url) -> std::optional<std::string> {
    const auto it = bodies.find(url);
    return it == bodies.end() ? std::nullopt : std::optional(it->second);
  };
  SamplerConfig cfg;
  cfg.model = "llama";
  cfg.nvml = false;
  cfg.ttft_slo_s = 1.25;  // between the 1 s and 1.5 s bounds
  cfg.kv_tokens_per_replica = 400000;
  SignalSampler sampler(cfg, fetch);
  FixedSource gw;
  gw.value.arrivals_total = 100;
  gw.value.arrival_prompt_tokens_total = 50000;
  gw.value.queued_prompt_tokens = 1200;
  auto first = sampler.sample(0, &gw, {{"10.0.0.1", 8000}});
  EXPECT_FALSE(first.arrivals) << "a first sample has nothing to difference against";
  EXPECT_FALSE(first.prefix_hit_ratio);
  EXPECT_EQ(first.prefill_backlog_tokens, 1200);
  EXPECT_EQ(first.kv_used_tokens, 200000);

  gw.value.arrivals_total = 110;
  gw.value.arrival_prompt_tokens_total = 56000;
  gw.value.prompt_sizes_total[PromptSizes::bucket_of(600)] = 10;
  const std::size_t one_s = 6, one_and_half = 7;  // kTtftBounds indices of 1 s and 1.5 s
  ASSERT_EQ(kTtftBounds[one_s], 1.0);
  ASSERT_EQ(kTtftBounds[one_and_half], 1.5);
  gw.value.ttft_total = 10;
  for (std::size_t i = 0; i < kTtftBounds.size(); ++i) gw.value.ttft_le_total[i] = i < one_s ? 0 : i == one_s ? 6 : 8;
  bodies["http://10.0.0.1:8000/metrics"] = engine(3000, 1100);
  const auto s = sampler.sample(0, &gw, {{"10.0.0.1", 8000}});
  EXPECT_EQ(s.arrivals, 10);
  EXPECT_EQ(s.arrival_prompt_tokens, 6000);
  ASSERT_TRUE(s.arrival_prompt_sizes);
  EXPECT_EQ((*s.arrival_prompt_sizes)[PromptSizes::bucket_of(600)], 10);
  EXPECT_EQ(s.ttft_total, 10);
  EXPECT_DOUBLE_EQ(*s.ttft_met, 7);  // 6 within 1 s, 8 within 1.5 s: halfway at 1.25 s
  EXPECT_DOUBLE_EQ(*s.prefix_hit_ratio, 0.5);  // (1100 - 100) / (3000 - 1000)

  // A gateway restart resets its counters: no negative difference, the next sample resumes.
  gw.value.arrivals_total = 3;
  gw.value.ttft_total = 0;
  EXPECT_FALSE(sampler.sample(0, &gw, {{"10.0.0.1", 8000}}).arrivals);

  // An engine without prefix-cache metrics: reported once, nothing taken as cached.
  bodies["http://10.0.0.1:8000/metrics"] = "llamacpp:requests_processing 1\nllamacpp:requests_deferred 0\n";
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(sampler.sample(0, &gw, {{"10.0.0.1", 8000}}).prefix_hit_ratio);
  EXPECT_EQ(sampler.missing().count("engine.prefix_cache"), 1u);
  // SGLang's gauge stands in for the counters (and the record goes).
  bodies["http://10.0.0.1:8000/metrics"] = "sglang:num_running_reqs 2\nsglang:cache_hit_rate 0.3\n";
  EXPECT_DOUBLE_EQ(*sampler.sample(0, &gw, {{"10.0.0.1", 8000}}).prefix_hit_ratio, 0.3);
  EXPECT_EQ(sampler.missing().count("engine.prefix_cache"), 0u);
}

TEST(Sampler, WorksWithoutGatewayOrEngines) {
  SamplerConfig cfg;
  cfg.model = "llama";
  cfg.nvml = false;
  SignalSampler sampler(cfg, [](const std::string&) { return std::nullopt; });
  const auto s = sampler.sample(0, nullptr, {});
  EXPECT_FALSE(s.concurrency || s.queue || s.gpu_util || s.kv_usage);
  const auto s2 = sampler.sample(0, nullptr, {{"127.0.0.1", 1}});
  EXPECT_FALSE(s2.concurrency);
  EXPECT_EQ(sampler.missing().count("engine.scrape"), 1u);
}

}  // namespace
}  // namespace tidegate::scaler
