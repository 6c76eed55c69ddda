#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "tidegate/cache/cache_config.h"
#include "tidegate/cache/minilm.h"
#include "tidegate/cache/semantic_cache.h"
#include "tidegate/common/config_error.h"

using namespace tidegate::cache;

namespace {
std::shared_ptr<const CacheConfig> parse(const std::string& yaml) {
  const auto root = YAML::Load(yaml);
  return parse_cache_config(root["cache"], "cache");
}
}  // namespace

TEST(CacheConfig, AbsentSectionIsOff) {
  EXPECT_FALSE(parse("other: 1\n")->enabled);
  EXPECT_FALSE(parse("cache: false\n")->enabled);
  EXPECT_TRUE(parse("cache: true\n")->enabled);
}

TEST(CacheConfig, FullSection) {
  const auto c = parse(R"(cache:
  enabled: true
  embedder: {type: minilm, model_dir: /models/minilm, timeout: 150ms, threads: 2, max_batch: 16}
  index: {type: hnsw, m: 16, ef_construction: 100, ef_search: 48, flat_max: 1000}
  threshold: 0.9
  context: {mode: window, turns: 3}
  ttl: 2h
  max_entries: 5000
  max_bytes: 64MiB
  max_temperature: 0.7
  cache_tool_calls: true
  data_dir: /var/lib/tidegate/cache
  lookup_timeout: 80ms
  models:
    llama:
      threshold: 0.95
      shared: true
      ttl: 10m
      context: {mode: scope}
    qwen:
      enabled: false
)");
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->embedder.type, "minilm");
  EXPECT_EQ(c->embedder.model_dir, "/models/minilm");
  EXPECT_DOUBLE_EQ(c->embedder.timeout_s, 0.15);
  EXPECT_EQ(c->embedder.threads, 2);
  EXPECT_EQ(c->embedder.max_batch, 16);
  EXPECT_EQ(c->index.type, IndexConfig::Type::kHnsw);
  EXPECT_EQ(c->index.hnsw_m, 16);
  EXPECT_EQ(c->index.ef_search, 48);
  EXPECT_EQ(c->index.flat_max, 1000u);
  EXPECT_DOUBLE_EQ(c->threshold, 0.9);
  EXPECT_EQ(c->context.mode, ContextConfig::Mode::kWindow);
  EXPECT_EQ(c->context.turns, 3);
  EXPECT_DOUBLE_EQ(c->ttl_s, 7200);
  EXPECT_EQ(c->max_entries, 5000u);
  EXPECT_EQ(c->max_bytes, 64ull << 20);
  EXPECT_DOUBLE_EQ(c->max_temperature, 0.7);
  EXPECT_TRUE(c->cache_tool_calls);
  EXPECT_EQ(c->data_dir, "/var/lib/tidegate/cache");
  EXPECT_DOUBLE_EQ(c->lookup_timeout_s, 0.08);
  EXPECT_DOUBLE_EQ(c->threshold_for("llama"), 0.95);
  EXPECT_DOUBLE_EQ(c->threshold_for("other"), 0.9);
  EXPECT_TRUE(c->shared_for("llama"));
  EXPECT_FALSE(c->shared_for("other"));
  EXPECT_DOUBLE_EQ(c->ttl_for("llama"), 600);
  EXPECT_EQ(c->context_for("llama").mode, ContextConfig::Mode::kScope);
  EXPECT_EQ(c->context_for("other").mode, ContextConfig::Mode::kWindow);
  EXPECT_FALSE(c->enabled_for("qwen"));
  EXPECT_TRUE(c->enabled_for("llama"));
}

TEST(CacheConfig, ShorthandForms) {
  const auto c = parse("cache:\n  embedder: hash\n  index: flat\n");
  EXPECT_EQ(c->embedder.type, "hash");
  EXPECT_EQ(c->index.type, IndexConfig::Type::kFlat);
}

TEST(CacheConfig, ErrorsNameKeyAndLine) {
  struct Case {
    const char* yaml;
    const char* key;
    int line;
  } cases[] = {
      {"cache:\n  enabled: true\n  treshold: 0.9\n", "cache.treshold", 3},
      {"cache:\n  threshold: 1.5\n", "cache.threshold", 2},
      {"cache:\n  index: {type: ivf}\n", "cache.index.type", 2},
      {"cache:\n  embedder:\n    type: bert\n", "cache.embedder.type", 3},
      {"cache:\n  embedder: {type: openai}\n", "cache.embedder.url", 2},
      {"cache:\n  models:\n    llama:\n      threshold: x\n", "cache.models.llama.threshold", 4},
      {"cache:\n  models:\n    llama:\n      context: {mode: all}\n", "cache.models.llama.context.mode", 4},
      {"cache:\n  ttl: 0\n", "cache.ttl", 2},
      {"cache:\n  max_bytes: 12\n", "cache.max_bytes", 2},
      {"cache:\n  embedder:\n    type: minilm\n    device: tpu\n", "cache.embedder.device", 4},
      {"cache:\n  embedder:\n    type: hash\n    device: gpu\n", "cache.embedder.device", 4},
      {"cache:\n  index:\n    type: gpu-fast\n", "cache.index.type", 3},
      {"cache:\n  index: gpu\n", "cache.index", 2},
      {"cache:\n  embedder:\n    type: minilm\n    precision: int4\n", "cache.embedder.precision", 4},
      {"cache:\n  index:\n    type: hnsw\n    storage: int8\n", "cache.index.storage", 4},
      {"cache:\n  embedder:\n    type: minilm\n    intra_op_threads: 0\n", "cache.embedder.intra_op_threads", 4},
  };
  for (const auto& c : cases) {
    try {
      parse(c.yaml);
      ADD_FAILURE() << "no error for " << c.yaml;
    } catch (const tidegate::ConfigError& e) {
      EXPECT_EQ(e.key(), c.key) << c.yaml << " -> " << e.what();
      EXPECT_EQ(e.line(), c.line) << c.yaml << " -> " << e.what();
    }
  }
}

TEST(CacheConfig, IndexStorage) {
  EXPECT_EQ(parse("cache: {enabled: true}\n")->index.storage, IndexConfig::Storage::kFp16);
  EXPECT_EQ(parse("cache:\n  index: {type: hnsw, storage: fp32}\n")->index.storage, IndexConfig::Storage::kFp32);
}

TEST(CacheConfig, IntraOpThreads) {
  EXPECT_EQ(parse("cache: {enabled: true}\n")->embedder.intra_op_threads, 1);
  EXPECT_EQ(parse("cache:\n  embedder: {type: minilm, intra_op_threads: 2}\n")->embedder.intra_op_threads, 2);
}

TEST(CacheConfig, EncoderPrecision) {
  EXPECT_EQ(parse("cache: {enabled: true}\n")->embedder.precision, MiniLMPrecision::kAuto);
  EXPECT_EQ(parse("cache:\n  embedder: {precision: fp32}\n")->embedder.precision, MiniLMPrecision::kFp32);
  const char* bf16 = "cache:\n  embedder:\n    type: minilm\n    precision: bf16\n";
  if (minilm_bf16_supported()) {
    EXPECT_EQ(parse(bf16)->embedder.precision, MiniLMPrecision::kBf16);
  } else {
    try {
      parse(bf16);
      ADD_FAILURE() << "bf16 accepted on a CPU without AVX512-BF16";
    } catch (const tidegate::ConfigError& e) {
      EXPECT_EQ(e.key(), "cache.embedder.precision");
      EXPECT_EQ(e.line(), 4);
    }
  }
}

TEST(CacheConfig, GpuKeys) {
  const auto dflt = parse("cache: {enabled: true}\n");
  EXPECT_EQ(dflt->embedder.device, EmbedderConfig::Device::kAuto);
  EXPECT_EQ(dflt->index.type, IndexConfig::Type::kHnsw);
  const auto gpu = parse("cache:\n  embedder: {type: minilm, device: gpu}\n  index: {type: gpu-flat, flat_max: 0}\n");
  EXPECT_EQ(gpu->embedder.device, EmbedderConfig::Device::kGpu);
  EXPECT_EQ(gpu->index.type, IndexConfig::Type::kGpuFlat);
  EXPECT_EQ(gpu->index.flat_max, 0u);
  EXPECT_EQ(parse("cache:\n  embedder: {device: cpu}\n")->embedder.device, EmbedderConfig::Device::kCpu);
  EXPECT_EQ(parse("cache:\n  index: gpu-flat\n")->index.type, IndexConfig::Type::kGpuFlat);
  // auto is fine for any embedder type (it only ever picks the GPU for minilm).
  EXPECT_EQ(parse("cache:\n  embedder: {type: hash, device: auto}\n")->embedder.device, EmbedderConfig::Device::kAuto);
}
