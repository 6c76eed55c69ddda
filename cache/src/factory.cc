#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "semantic_cache_impl.h"
#include "tidegate/cache/cache_factory.h"
#include "tidegate/cache/hash_embedder.h"
#include "tidegate/cache/minilm.h"
#include "tidegate/cache/openai_embedder.h"

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

}  // namespace

std::shared_ptr<Embedder> make_embedder(const EmbedderConfig& config) {
  if (config.type == "minilm") {
    MiniLMOptions options;
    options.blas_threads = 1;  // parallelism comes from the cache's worker pool
    return make_minilm_embedder(resolve_model_dir(config.model_dir), options);
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
