// GPU backend selection: with no GPU (or a build without CUDA) every GPU setting must give a
// working CPU cache, say so once in the log and in stats(); with a GPU, a lookup must run
// through the GPU encoder and the GPU index.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "test_embedder.h"
#include "tidegate/cache/cache_factory.h"
#include "tidegate/encoder/minilm.h"
#include "tidegate/common/log.h"
#include "tidegate/kernels/gpu.h"

using namespace tidegate::cache;
namespace encoder = tidegate::encoder;

namespace {

boost::json::object chat(const std::string& user) {
  return boost::json::object{
      {"model", "m"}, {"messages", boost::json::array{boost::json::object{{"role", "user"}, {"content", user}}}}};
}

struct Harness {
  prometheus::Registry registry;
  std::unique_ptr<SemanticCache> cache;

  Harness(CacheConfig cfg, std::shared_ptr<encoder::Embedder> embedder) {
    cfg.enabled = true;
    auto c = std::make_shared<const CacheConfig>(std::move(cfg));
    cache = embedder ? make_semantic_cache(c, registry, std::move(embedder)) : make_semantic_cache(c, registry);
  }
  CachePlan plan(const boost::json::object& body) {
    RequestView v;
    v.model = "m";
    v.tenant = "t";
    v.body = &body;
    return cache->plan(v);
  }
  LookupResult lookup(const CachePlan& p) {
    std::promise<LookupResult> done;
    auto f = done.get_future();
    cache->lookup(p, std::chrono::steady_clock::now() + std::chrono::seconds(10),
                  [&done](LookupResult r) { done.set_value(std::move(r)); });
    return f.get();
  }
  void insert_and_wait(const CachePlan& p, const std::string& content) {
    const auto before = cache->stats().at("entries").as_uint64();
    cache->insert(p, CachedAnswer{content, "stop", 10, 20});
    for (int i = 0; i < 1000 && cache->stats().at("entries").as_uint64() == before; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
};

// Sends the logger to a file for the scope and returns its lines.
class LogCapture {
 public:
  LogCapture() : path_(std::filesystem::temp_directory_path() / ("tidegate-backend-log-" + std::to_string(::getpid()))) {
    std::filesystem::remove(path_);
    tidegate::log::set_output_file(path_.string());
  }
  ~LogCapture() {
    tidegate::log::set_output_file("");
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  std::vector<boost::json::object> events(std::string_view name) const {
    std::vector<boost::json::object> out;
    std::ifstream in(path_);
    for (std::string line; std::getline(in, line);) {
      auto v = boost::json::parse(line).as_object();
      if (v.at("event").as_string() == name) out.push_back(std::move(v));
    }
    return out;
  }

 private:
  std::filesystem::path path_;
};

std::string model_dir() { return std::string(TIDEGATE_SOURCE_ROOT) + "/" + encoder::kDefaultMiniLMDir; }
bool have_model() { return std::filesystem::exists(model_dir() + "/model.safetensors"); }

}  // namespace

TEST(CacheBackends, NoGpuMinilmFallsBackToCpuWithOneLogLine) {
  std::string why;
  if (tidegate::kernels::gpu_available(&why)) GTEST_SKIP() << "a GPU is present; the CPU fallback is tested on CPU hosts";
  if (!have_model()) GTEST_SKIP() << "MiniLM weights absent at " << model_dir();
  for (const auto device : {EmbedderConfig::Device::kAuto, EmbedderConfig::Device::kGpu}) {
    LogCapture log;
    EmbedderConfig e;
    e.model_dir = model_dir();
    e.device = device;
    const auto embedder = make_embedder(e);
    ASSERT_TRUE(embedder);
    EXPECT_EQ(embedder->name(), "minilm");
    const auto v = embedder->embed({"how do I reset my password"}, std::chrono::steady_clock::now() + std::chrono::seconds(30));
    EXPECT_EQ(v.size(), 384u);
    const auto lines = log.events("cache.embedder_backend");
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0].at("device").as_string(), "cpu");
    EXPECT_FALSE(lines[0].at("reason").as_string().empty());
    // Explicitly asked for and not given: a warning; auto: information.
    EXPECT_EQ(lines[0].at("level").as_string(), device == EmbedderConfig::Device::kGpu ? "warn" : "info");
  }
}

// The verifier's device: cpu never asks for CUDA; auto and gpu take the GPU verifier when a
// device answers and otherwise the CPU one, with one line saying why (a warning when gpu was
// asked for). Either way a pool with a false-hit bound decides through the verifier.
TEST(CacheBackends, VerifierRunsWhereTheDeviceSettingAndTheHostAllow) {
  if (!have_model()) GTEST_SKIP() << "MiniLM weights absent at " << model_dir();
  const std::string verifier_dir = std::string(TIDEGATE_SOURCE_ROOT) + "/" + kDefaultVerifierDir;
  if (!std::filesystem::exists(verifier_dir + "/verifier.safetensors")) GTEST_SKIP() << "no verifier in " << verifier_dir;
  std::string why;
  const bool gpu = tidegate::kernels::gpu_available(&why);
  for (const auto device : {EmbedderConfig::Device::kCpu, EmbedderConfig::Device::kAuto, EmbedderConfig::Device::kGpu}) {
    LogCapture log;
    CacheConfig cfg;
    cfg.embedder.model_dir = model_dir();
    cfg.embedder.device = EmbedderConfig::Device::kCpu;
    cfg.max_false_hit_rate = 0.05;
    Calibration cal;
    cal.ok = true;
    cal.threshold = 0.5;
    cfg.calibration = cal;
    cfg.verifier.dir = verifier_dir;
    cfg.verifier.device = device;
    cfg.verifier.timeout_s = 10;  // a loaded CI box must not turn this into a timeout
    cfg.lookup_timeout_s = 10;    // nor the lookup's own 0.25 s (a TSan build on 2 cores bypassed)
    Harness h(cfg, nullptr);
    const auto tiers = h.cache->stats().at("tiers").as_object();
    const bool on_gpu = gpu && device != EmbedderConfig::Device::kCpu;
    EXPECT_EQ(tiers.at("verifier").as_string(), on_gpu ? "pair-verifier-gpu" : "pair-verifier")
        << boost::json::serialize(tiers);
    const auto fallback = log.events("cache.verifier_backend");
    if (on_gpu || device == EmbedderConfig::Device::kCpu) {
      EXPECT_TRUE(fallback.empty());
    } else {
      ASSERT_EQ(fallback.size(), 1u);
      EXPECT_EQ(fallback[0].at("level").as_string(), device == EmbedderConfig::Device::kGpu ? "warn" : "info");
      EXPECT_FALSE(fallback[0].at("reason").as_string().empty());
    }
    const auto chosen = log.events("cache.verifier");
    ASSERT_EQ(chosen.size(), 1u);
    EXPECT_EQ(chosen[0].at("device").as_string(), on_gpu ? "gpu" : "cpu");
    // The verifier decides a lookup: a near-duplicate is a hit with its probability.
    h.insert_and_wait(h.plan(chat("How do I reset my password?")), "Use the reset link.");
    const auto r = h.lookup(h.plan(chat("How can I reset my password?")));
    EXPECT_EQ(r.status, CacheStatus::kHit) << r.similarity << " " << r.probability;
    EXPECT_GT(r.probability, 0.5f);
  }
}

TEST(CacheBackends, CpuDeviceNeverLogsAFallback) {
  LogCapture log;
  EmbedderConfig e;
  e.type = "hash";
  e.dim = 64;
  EXPECT_EQ(make_embedder(e)->name(), "hash");
  EXPECT_TRUE(log.events("cache.embedder_backend").empty());
}

TEST(CacheBackends, NoGpuFlatIndexServesFromCpuAndSaysSo) {
  std::string why;
  if (tidegate::kernels::gpu_available(&why)) GTEST_SKIP() << "a GPU is present; the CPU fallback is tested on CPU hosts";
  LogCapture log;
  CacheConfig cfg;
  cfg.index.type = IndexConfig::Type::kGpuFlat;
  cfg.index.flat_max = 0;  // would move every scope to the GPU at its first entry
  Harness h(cfg, std::make_shared<fakes::WordEmbedder>(64));
  const auto body = chat("what is the capital of france");
  const auto p = h.plan(body);
  ASSERT_TRUE(p.read);
  h.insert_and_wait(p, "Paris");
  const auto r = h.lookup(p);
  EXPECT_EQ(r.status, CacheStatus::kHit);
  EXPECT_EQ(r.answer.content, "Paris");
  const auto s = h.cache->stats();
  EXPECT_EQ(s.at("index").as_string(), "hnsw");
  EXPECT_FALSE(s.at("index_fallback_reason").as_string().empty());
  EXPECT_EQ(s.at("gpu_scopes").as_uint64(), 0u);
  EXPECT_EQ(s.at("embedder_device").as_string(), "cpu");
  const auto lines = log.events("cache.index_backend");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].at("level").as_string(), "warn");
  EXPECT_EQ(lines[0].at("requested").as_string(), "gpu-flat");
}

TEST(CacheBackends, GpuLookupThroughGpuEncoderAndGpuIndex) {
  std::string why;
  if (!tidegate::kernels::gpu_available(&why)) GTEST_SKIP() << "no usable GPU: " << why;
  if (!have_model()) GTEST_SKIP() << "MiniLM weights absent at " << model_dir();
  CacheConfig cfg;
  cfg.embedder.model_dir = model_dir();
  cfg.embedder.device = EmbedderConfig::Device::kGpu;
  cfg.index.type = IndexConfig::Type::kGpuFlat;
  cfg.index.flat_max = 0;
  Harness h(cfg, nullptr);
  const auto s0 = h.cache->stats();
  ASSERT_EQ(s0.at("embedder_device").as_string(), "gpu") << boost::json::serialize(s0);
  ASSERT_EQ(s0.at("index").as_string(), "gpu-flat") << boost::json::serialize(s0);
  const auto stored = chat("How do I reset my password?");
  const auto p1 = h.plan(stored);
  h.insert_and_wait(p1, "Use the reset link.");
  // A different scope with the same words must never answer from the first one.
  auto other = stored;
  other["max_tokens"] = 7;
  h.insert_and_wait(h.plan(other), "other scope");
  EXPECT_EQ(h.cache->stats().at("gpu_scopes").as_uint64(), 2u);
  // Different text, same meaning for an uncased model: similarity well above the threshold.
  const auto r = h.lookup(h.plan(chat("how do i reset my password")));
  EXPECT_EQ(r.status, CacheStatus::kHit) << r.similarity;
  EXPECT_EQ(r.answer.content, "Use the reset link.");
  const auto miss = h.lookup(h.plan(chat("What is the boiling point of water at sea level?")));
  EXPECT_EQ(miss.status, CacheStatus::kMiss);
}
