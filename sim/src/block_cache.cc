#include "block_cache.h"

namespace tidegate::sim::detail {

BlockCache& BlockCache::operator=(const BlockCache& other) {
  if (this == &other) return *this;
  // The LRU iterators point into the other list: rebuild them against ours.
  blocks_ = other.blocks_;
  lru_ = other.lru_;
  resident_ = other.resident_;
  unpinned_ = other.unpinned_;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) blocks_.at(*it).lru = it;
  return *this;
}

std::size_t BlockCache::match(std::span<const std::uint64_t> hashes) const {
  std::size_t n = 0;
  while (n < hashes.size() && blocks_.count(hashes[n])) ++n;
  return n;
}

std::int64_t BlockCache::unpinned_tokens_of(std::span<const std::uint64_t> hashes) const {
  std::int64_t sum = 0;
  for (const auto h : hashes) {
    const auto it = blocks_.find(h);
    if (it != blocks_.end() && it->second.refs == 0) sum += it->second.tokens;
  }
  return sum;
}

void BlockCache::pin(std::uint64_t hash) {
  auto& e = blocks_.at(hash);
  if (e.refs++ == 0) {
    lru_.erase(e.lru);
    unpinned_ -= e.tokens;
  }
}

void BlockCache::unpin(std::uint64_t hash) {
  auto it = blocks_.find(hash);
  if (it == blocks_.end() || it->second.refs == 0) return;
  if (--it->second.refs == 0) {
    it->second.lru = lru_.insert(lru_.end(), hash);  // most recently used
    unpinned_ += it->second.tokens;
  }
}

bool BlockCache::insert_pinned(std::uint64_t hash, std::int32_t tokens) {
  auto [it, fresh] = blocks_.try_emplace(hash);
  if (!fresh) {
    pin(hash);
    return false;
  }
  it->second.refs = 1;
  it->second.tokens = tokens;
  resident_ += tokens;
  return true;
}

std::int64_t BlockCache::evict_until(std::int64_t limit) {
  std::int64_t evicted = 0;
  while (resident_ > limit && !lru_.empty()) {
    const auto it = blocks_.find(lru_.front());
    lru_.pop_front();
    resident_ -= it->second.tokens;
    unpinned_ -= it->second.tokens;
    evicted += it->second.tokens;
    blocks_.erase(it);
  }
  return evicted;
}

}  // namespace tidegate::sim::detail
