#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "model_dir.h"
#include "semantic_cache_impl.h"
#include "tidegate/cache/cache_factory.h"
#include "tidegate/encoder/hash_embedder.h"
#include "tidegate/encoder/minilm.h"
#include "tidegate/encoder/openai_embedder.h"
#include "tidegate/common/log.h"
#include "tidegate/kernels/gpu.h"

namespace tidegate::cache {

std::string model_dir_problem(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return "folder " + dir + " does not exist";
  if (!fs::is_directory(dir, ec)) return dir + " is not a folder";
  for (const char* file : {"config.json", "vocab.txt", "model.safetensors"})
    if (!fs::is_regular_file(fs::path(dir) / file, ec))
      return "folder " + dir + " has no " + file + " (not a sentence-transformers model folder?)";
  return "";
}

ModelDirChoice choose_model_dir(const std::string& configured) {
  namespace fs = std::filesystem;
  if (!configured.empty()) return {configured, "config", model_dir_problem(configured)};
  std::error_code ec;
  const auto here = (fs::current_path(ec) / encoder::kDefaultMiniLMDir).lexically_normal().string();
  if (model_dir_problem(here).empty()) return {here, "default in the working directory", ""};
  std::string error = "not set, and the default folder " + std::string(encoder::kDefaultMiniLMDir) +
                      " is not a model folder in the working directory (" + here + ")";
#ifdef TIDEGATE_SOURCE_ROOT
  const auto tree = (fs::path(TIDEGATE_SOURCE_ROOT) / encoder::kDefaultMiniLMDir).lexically_normal().string();
  if (model_dir_problem(tree).empty()) return {tree, "default in the source tree", ""};
  error += " nor in the source tree (" + tree + ")";
#endif
  return {"", "", error + "; run scripts/setup.sh or set model_dir"};
}

namespace {

std::string resolve_model_dir(const std::string& configured) {
  const auto choice = choose_model_dir(configured);
  if (!choice.error.empty()) throw std::runtime_error("cache.embedder.model_dir: " + choice.error);
  std::error_code ec;
  const auto shown = std::filesystem::absolute(choice.dir, ec).lexically_normal().string();
  log::info("cache.embedder_model_dir", {{"dir", ec ? choice.dir : shown}, {"origin", choice.origin}});
  return choice.dir;
}

// auto/gpu: the CUDA encoder when a device answers, else the CPU one. One log line either way,
// at warn level when the GPU was asked for explicitly: a cache setting should not keep the
// gateway from starting on a CPU host, but the operator must be able to see the fallback.
std::shared_ptr<encoder::Embedder> make_gpu_minilm(const EmbedderConfig& config, const std::string& model_dir) {
  if (config.device == EmbedderConfig::Device::kCpu) return nullptr;
  const char* requested = config.device == EmbedderConfig::Device::kGpu ? "gpu" : "auto";
  std::string why;
  std::unique_ptr<encoder::Embedder> gpu;
  if (kernels::gpu_available(&why)) {
    kernels::GpuEncoderOptions options;
    options.max_batch = static_cast<std::size_t>(std::max(config.max_batch, 1));
    gpu = kernels::make_gpu_minilm_embedder(model_dir, options, &why);
  }
  if (gpu) {
    log::info("cache.embedder_backend", {{"embedder", gpu->name()}, {"device", "gpu"}, {"requested", requested}});
    return gpu;
  }
  log::write(config.device == EmbedderConfig::Device::kGpu ? log::Level::kWarn : log::Level::kInfo,
             "cache.embedder_backend",
             {{"embedder", "minilm"}, {"device", "cpu"}, {"requested", requested}, {"reason", why}});
  return nullptr;
}

}  // namespace

IndexBackend choose_index_backend(const IndexConfig& config, std::size_t dim) {
  IndexBackend b;
  if (config.type == IndexConfig::Type::kFlat) {
    b.name = "flat";
    return b;
  }
  if (config.type == IndexConfig::Type::kHnsw) {
    b.name = "hnsw";
    return b;
  }
  // gpu-flat: probe once here so a missing GPU is one log line at start, not one per scope.
  std::string why;
  if (kernels::gpu_available(&why) && kernels::make_gpu_flat_index(dim, &why)) {
    b.name = "gpu-flat";
    b.gpu = [dim]() {
      std::string ignored;
      return kernels::make_gpu_flat_index(dim, &ignored);
    };
    log::info("cache.index_backend", {{"index", "gpu-flat"}, {"dim", dim}});
    return b;
  }
  // HNSW, not flat: a cache sized for a GPU scan would make exact CPU scans of big scopes
  // (0.7 s at 1M) exceed the lookup timeout on every request.
  b.name = "hnsw";
  b.fallback_reason = why;
  log::warn("cache.index_backend", {{"index", "hnsw"}, {"requested", "gpu-flat"}, {"reason", why}});
  return b;
}

std::shared_ptr<encoder::Embedder> make_embedder(const EmbedderConfig& config) {
  if (config.type == "minilm") {
    const auto model_dir = resolve_model_dir(config.model_dir);
    if (auto gpu = make_gpu_minilm(config, model_dir)) return gpu;
    encoder::MiniLMOptions options;
    options.blas_threads = 1;  // parallelism comes from the cache's worker pool
    options.intra_op_threads = config.intra_op_threads;
    options.precision = config.precision;
    auto cpu = encoder::make_minilm_embedder(model_dir, options);
    // Which dense arithmetic the CPU runs: the same config is 2-4x apart between hosts with and
    // without AMX or AVX512-BF16 (bench/RESULTS.md), which an operator comparing hosts should see.
    const auto arithmetic = encoder::minilm_arithmetic(options);
    log::info("cache.embedder_cpu", {{"precision", arithmetic.precision}, {"matrix_tiles", arithmetic.matrix_tiles}});
    return cpu;
  }
  if (config.type == "hash") {
    encoder::HashEmbedderOptions options;
    options.dim = static_cast<std::size_t>(config.dim);
    return encoder::make_hash_embedder(options);
  }
  if (config.type == "openai") {
    encoder::OpenAIEmbedderOptions options;
    options.url = config.url;
    options.model = config.model;
    if (!config.api_key_env.empty())
      if (const char* key = std::getenv(config.api_key_env.c_str())) options.api_key = key;
    options.dim = static_cast<std::size_t>(config.dim);
    options.max_batch = static_cast<std::size_t>(config.max_batch);
    options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(config.timeout_s * 1000));
    return encoder::make_openai_embedder(options);
  }
  throw std::runtime_error("cache: embedder type '" + config.type + "' is not available in this build");
}

std::unique_ptr<SemanticCache> make_semantic_cache(std::shared_ptr<const CacheConfig> config,
                                                   prometheus::Registry& registry,
                                                   std::shared_ptr<encoder::Embedder> embedder) {
  return make_semantic_cache(std::move(config), registry, std::move(embedder), nullptr);
}

std::unique_ptr<SemanticCache> make_semantic_cache(std::shared_ptr<const CacheConfig> config,
                                                   prometheus::Registry& registry,
                                                   std::shared_ptr<encoder::Embedder> embedder,
                                                   std::shared_ptr<const encoder::PairScorer> verifier) {
  if (!config || !config->enabled) return nullptr;
  if (!embedder) throw std::invalid_argument("make_semantic_cache: no embedder");
  return std::make_unique<SemanticCacheImpl>(std::move(config), registry, std::move(embedder), std::move(verifier));
}

std::unique_ptr<SemanticCache> make_semantic_cache(std::shared_ptr<const CacheConfig> config,
                                                   prometheus::Registry& registry) {
  if (!config || !config->enabled) return nullptr;
  auto embedder = make_embedder(config->embedder);
  return make_semantic_cache(std::move(config), registry, std::move(embedder));
}

}  // namespace tidegate::cache
