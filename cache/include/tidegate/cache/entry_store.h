#pragma once
// Entries and their per-scope vector indexes, with TTL and LRU caps on count and bytes.
// Each scope key owns its own index, so a search can only ever return entries of its scope:
// isolation does not depend on a global top-k being deep enough. A scope starts on an exact
// flat index and moves to HNSW once it holds more than IndexConfig::flat_max vectors, or, with
// index type gpu-flat and a GPU index factory, to its own GPU flat index (one per scope, so the
// isolation argument is the same on the GPU; there is never a shared GPU index to filter).
#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tidegate/cache/cache_config.h"
#include "tidegate/cache/faiss_index.h"
#include "tidegate/cache/semantic_cache.h"

namespace tidegate::cache {

// Unix epoch milliseconds: entries outlive the process, so steady_clock is not usable here.
std::int64_t now_unix_ms();

struct Entry {
  std::uint64_t id = 0;
  std::string scope_key;
  std::string model;
  std::string tenant;
  std::string text;
  CachedAnswer answer;
  std::int64_t created_ms = 0;
  std::int64_t last_hit_ms = 0;
  double ttl_s = 0;
  std::vector<float> vector;

  std::size_t bytes() const;
  bool expired(std::int64_t now_ms) const { return now_ms >= created_ms + static_cast<std::int64_t>(ttl_s * 1000.0); }
};

enum class EvictReason { kTtl, kEntries, kBytes, kAdmin, kReplaced };
std::string_view to_string(EvictReason r);

struct Match {
  Entry entry;  // a copy: the store may evict the original at any time
  float similarity = 0;
};

// The exact tier's key: runs of ASCII whitespace become one space and the ends are trimmed.
// Case and punctuation are kept (they can change an answer, and the lexical guard reads case).
std::string normalize_prompt(std::string_view text);

class EntryStore final {
 public:
  using EvictFn = std::function<void(const Entry&, EvictReason)>;
  // Makes an empty GPU index of the store's dim, or nullptr (device full, CUDA error).
  using IndexFactory = std::function<std::unique_ptr<encoder::VectorIndex>()>;
  // `gpu_index` is used only when index.type is kGpuFlat; without it kGpuFlat acts as kHnsw.
  EntryStore(std::size_t dim, IndexConfig index, std::uint64_t max_entries, std::uint64_t max_bytes,
             IndexFactory gpu_index = {});

  // Takes ownership; evicts LRU entries beyond the caps. An entry with the same scope and
  // text replaces the older one. `on_evict` runs under the store lock for each removed entry.
  void insert(Entry entry, const EvictFn& on_evict);
  // Best live, unexpired entry of `scope_key`, and only of it.
  std::optional<Match> best(const std::string& scope_key, const float* query, std::int64_t now_ms) const;
  // Up to k live, unexpired entries of `scope_key` with similarity >= floor, best first.
  std::vector<Match> candidates(const std::string& scope_key, const float* query, std::size_t k, float floor,
                                std::int64_t now_ms) const;
  // The exact tier: a live entry of `scope_key` whose normalised text (normalize_prompt) equals
  // normalize_prompt(text), found without a vector; the newest such entry.
  std::optional<Match> exact(const std::string& scope_key, const std::string& text, std::int64_t now_ms) const;
  void touch(std::uint64_t id, std::int64_t now_ms);

  bool erase(std::uint64_t id, const EvictFn& on_evict);
  std::size_t erase_matching(const std::optional<std::string>& tenant, const std::optional<std::string>& model,
                             const EvictFn& on_evict);
  std::size_t expire(std::int64_t now_ms, const EvictFn& on_evict);
  // Rebuilds scopes whose tombstones exceed the limit, and promotes big flat scopes to HNSW.
  std::size_t maintain_indexes();

  std::vector<Entry> copy_all() const;
  std::size_t size() const;
  std::uint64_t bytes() const;
  std::size_t scopes() const;
  std::size_t gpu_scopes() const;  // scopes whose vectors live in a GPU index
  std::uint64_t next_id() { return next_id_.fetch_add(1); }
  void reserve_ids_above(std::uint64_t id);

 private:
  struct Slot {
    Entry entry;
    std::list<std::uint64_t>::iterator lru;
  };
  struct Scope {
    std::shared_ptr<FaissVectorIndex> index;  // CPU; null once the scope moved to the GPU
    std::unique_ptr<encoder::VectorIndex> gpu;
    std::unordered_map<std::string, std::uint64_t> by_text;
    std::unordered_map<std::string, std::uint64_t> by_normal;  // sha256 of the normalised text
    encoder::VectorIndex& active() const { return gpu ? *gpu : *index; }
  };
  bool erase_locked(std::uint64_t id, EvictReason reason, const EvictFn& on_evict);
  void maybe_promote_to_gpu_locked(const std::string& scope_key);

  const std::size_t dim_;
  const IndexConfig index_config_;
  const std::uint64_t max_entries_;
  const std::uint64_t max_bytes_;
  const IndexFactory gpu_index_;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::uint64_t, Slot> entries_;
  std::unordered_map<std::string, Scope> scopes_;
  mutable std::mutex lru_mu_;  // guards lru_ order and last_hit under a shared mu_
  std::list<std::uint64_t> lru_;  // front = most recently used
  std::uint64_t bytes_ = 0;
  std::atomic<std::uint64_t> next_id_{1};
};

}  // namespace tidegate::cache
