#pragma once
// Construction of the cache and its embedder. make_semantic_cache(config, registry) in
// semantic_cache.h builds the embedder from config.embedder; this overload takes one ready-made
// (tests, benchmarks, or a GPU encoder from kernels/).
#include <memory>

#include "tidegate/cache/cache_config.h"
#include "tidegate/encoder/embedder.h"
#include "tidegate/encoder/pair_verifier.h"
#include "tidegate/cache/semantic_cache.h"

namespace tidegate::cache {

// Throws std::runtime_error naming what is wrong (e.g. the model folder is missing).
std::shared_ptr<encoder::Embedder> make_embedder(const EmbedderConfig& config);

// Returns nullptr when config->enabled is false. A data directory that cannot be read is
// reported and skipped: the cache then starts empty (or memory-only) rather than failing.
std::unique_ptr<SemanticCache> make_semantic_cache(std::shared_ptr<const CacheConfig> config,
                                                   prometheus::Registry& registry,
                                                   std::shared_ptr<encoder::Embedder> embedder);
// With a ready-made pair verifier (tests); null loads it from config->verifier as above.
std::unique_ptr<SemanticCache> make_semantic_cache(std::shared_ptr<const CacheConfig> config,
                                                   prometheus::Registry& registry,
                                                   std::shared_ptr<encoder::Embedder> embedder,
                                                   std::shared_ptr<const encoder::PairScorer> verifier);

}  // namespace tidegate::cache
