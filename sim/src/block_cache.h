#pragma once
// A replica's prefix cache of KV blocks, as vLLM's block pool keeps it: every computed prompt
// block stays resident under its chained hash; blocks referenced by running sequences are
// pinned; unreferenced ones sit in an LRU list and are evicted, oldest first, only when new
// KV is needed. The caller (TimingModel) keeps the sum "private KV + resident blocks" within
// capacity.
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>

namespace tidegate::sim::detail {

class BlockCache final {
 public:
  BlockCache() = default;
  BlockCache(const BlockCache& other) { *this = other; }
  BlockCache& operator=(const BlockCache& other);

  // Leading blocks of `hashes` resident now (0 when the first is not).
  std::size_t match(std::span<const std::uint64_t> hashes) const;
  // Tokens of those blocks that are unreferenced (they stop being evictable once pinned).
  std::int64_t unpinned_tokens_of(std::span<const std::uint64_t> hashes) const;

  void pin(std::uint64_t hash);
  void unpin(std::uint64_t hash);
  // A freshly computed block, pinned by its sequence. Returns false when an equal block is
  // already resident (a concurrent duplicate): that one is pinned instead.
  bool insert_pinned(std::uint64_t hash, std::int32_t tokens);

  // Evicts least recently used unreferenced blocks until resident_tokens() <= limit (or none
  // is left). Returns the tokens evicted.
  std::int64_t evict_until(std::int64_t limit);

  std::int64_t resident_tokens() const { return resident_; }
  std::int64_t evictable_tokens() const { return unpinned_; }
  std::int64_t pinned_tokens() const { return resident_ - unpinned_; }

 private:
  struct Entry {
    std::int32_t refs = 0;
    std::int32_t tokens = 0;
    std::list<std::uint64_t>::iterator lru;  // valid while refs == 0
  };
  std::unordered_map<std::uint64_t, Entry> blocks_;
  std::list<std::uint64_t> lru_;  // unreferenced, least recently used first
  std::int64_t resident_ = 0;
  std::int64_t unpinned_ = 0;
};

}  // namespace tidegate::sim::detail
