#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "semantic_cache_impl.h"
#include "tidegate/cache/cache_factory.h"
#include "tidegate/cache/hash_embedder.h"
#include "tidegate/cache/minilm.h"
#include "tidegate/cache/openai_embedder.h"
#include "tidegate/common/log.h"
#include "tidegate/kernels/gpu.h"

namespace tidegate::cache {
namespace {

// A relative model folder is tried from the working directory, then from the source tree, so
// tests and tools work from any directory.
std::string resolve_model_dir(const std::string& configured) {
  const std::string dir = configured.empty() ? kDefaultMiniLMDir : configured;
  namespace fs = std::filesystem;
  if (fs::path(dir).is_absolute() || fs::exists(dir)) return dir;
#ifdef TIDEGATE_SOURCE_ROOT
  const auto alt = fs::path(TIDEGATE_SOURCE_ROOT) / dir;
  if (fs::exists(alt)) return alt.string();
#endif
  return dir;
}

// auto/gpu: the CUDA encoder when a device answers, else the CPU one. One log line either way,
// at warn level when the GPU was asked for explicitly: a cache setting should not keep the
// gateway from starting on a CPU host, but the operator must be able to see the fallback.
std::shared_ptr<Embedder> make_gpu_minilm(const EmbedderConfig& config, const std::string& model_dir) {
  if (config.device == EmbedderConfig::Device::kCpu) return nullptr;
  const char* requested = config.device == EmbedderConfig::Device::kGpu ? "gpu" : "auto";
  std::string why;
  std::unique_ptr<Embedder> gpu;
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

std::shared_ptr<Embedder> make_embedder(const EmbedderConfig& config) {
  if (config.type == "minilm") {
    const auto model_dir = resolve_model_dir(config.model_dir);
    if (auto gpu = make_gpu_minilm(config, model_dir)) return gpu;
    MiniLMOptions options;
    options.blas_threads = 1;  // parallelism comes from the cache's worker pool
    options.intra_op_threads = config.intra_op_threads;
    options.precision = config.precision;
    return make_minilm_embedder(model_dir, options);
  }
  if (config.type == "hash") {
    HashEmbedderOptions options;
    options.dim = static_cast<std::size_t>(config.dim);
    return make_hash_embedder(options);
  }
  if (config.type == "openai") {
    OpenAIEmbedderOptions options;
    options.url = config.url;
    options.model = config.model;
    if (!config.api_key_env.empty())
      if (const char* key = std::getenv(config.api_key_env.c_str())) options.api_key = key;
    options.dim = static_cast<std::size_t>(config.dim);
    options.max_batch = static_cast<std::size_t>(config.max_batch);
    options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(config.timeout_s * 1000));
    return make_openai_embedder(options);
  }
  throw std::runtime_error("cache: embedder type '" + config.type + "' is not available in this build");
}

std::unique_ptr<SemanticCache> make_semantic_cache(std::shared_ptr<const CacheConfig> config,
                                                   prometheus::Registry& registry,
                                                   std::shared_ptr<Embedder> embedder) {
  if (!config || !config->enabled) return nullptr;
  if (!embedder) throw std::invalid_argument("make_semantic_cache: no embedder");
  return std::make_unique<SemanticCacheImpl>(std::move(config), registry, std::move(embedder));
}

std::unique_ptr<SemanticCache> make_semantic_cache(std::shared_ptr<const CacheConfig> config,
                                                   prometheus::Registry& registry) {
  if (!config || !config->enabled) return nullptr;
  auto embedder = make_embedder(config->embedder);
  return make_semantic_cache(std::move(config), registry, std::move(embedder));
}

}  // namespace tidegate::cache
