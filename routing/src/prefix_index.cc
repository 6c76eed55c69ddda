#include "tidegate/routing/prefix_index.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace tidegate::routing {

PrefixIndex::PrefixIndex(std::size_t capacity_blocks) : nodes_(capacity_blocks) {
  if (capacity_blocks == 0) return;
  // A table at most half full keeps linear probes short.
  const std::size_t slots = std::bit_ceil(capacity_blocks * 2);
  table_.assign(slots, 0);
  shift_ = 64 - std::countr_zero(slots);
}

std::size_t PrefixIndex::home(std::uint64_t hash) const {
  // Fibonacci hashing: traces carry small sequential block ids, not only well-mixed hashes.
  return static_cast<std::size_t>((hash * 0x9e3779b97f4a7c15ULL) >> shift_);
}

std::uint32_t PrefixIndex::find(std::uint64_t hash) const {
  if (table_.empty()) return kNone;
  const std::size_t mask = table_.size() - 1;
  for (std::size_t i = home(hash);; i = (i + 1) & mask) {
    const std::uint32_t slot = table_[i];
    if (slot == 0) return kNone;
    if (nodes_[slot - 1].hash == hash) return slot - 1;
  }
}

void PrefixIndex::unlink(std::uint32_t n) {
  Node& x = nodes_[n];
  (x.prev == kNone ? head_ : nodes_[x.prev].next) = x.next;
  (x.next == kNone ? tail_ : nodes_[x.next].prev) = x.prev;
}

void PrefixIndex::push_front(std::uint32_t n) {
  nodes_[n].prev = kNone;
  nodes_[n].next = head_;
  (head_ == kNone ? tail_ : nodes_[head_].prev) = n;
  head_ = n;
}

void PrefixIndex::erase_from_table(std::uint64_t hash) {
  // Backward-shift deletion: later entries of the probe run move up, so no tombstones build up.
  const std::size_t mask = table_.size() - 1;
  std::size_t hole = home(hash);
  while (nodes_[table_[hole] - 1].hash != hash) hole = (hole + 1) & mask;
  for (std::size_t i = (hole + 1) & mask; table_[i] != 0; i = (i + 1) & mask) {
    const std::size_t want = home(nodes_[table_[i] - 1].hash);
    // The entry at i may fill the hole when its home is not in (hole, i], cyclically.
    if (((i - want) & mask) >= ((i - hole) & mask)) {
      table_[hole] = table_[i];
      hole = i;
    }
  }
  table_[hole] = 0;
}

std::size_t PrefixIndex::match(std::span<const std::uint64_t> blocks) const {
  // Held blocks of a chain form a prefix (see the class comment): binary search its end. Most
  // replicas hold nothing of a given prompt: one probe of its first block settles those.
  if (blocks.empty() || find(blocks[0]) == kNone) return 0;
  std::size_t lo = 1, hi = blocks.size();  // blocks [0, lo) held; [hi, n) not
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (find(blocks[mid]) != kNone) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

void PrefixIndex::insert(std::span<const std::uint64_t> blocks) {
  if (nodes_.empty()) return;
  // Last block first, so the first block ends up the most recent: eviction then takes a
  // chain from its end.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    std::uint32_t n = find(*it);
    if (n != kNone) {
      unlink(n);
    } else {
      if (size_ < nodes_.size()) {
        n = static_cast<std::uint32_t>(size_++);
      } else {  // full: the least recent block's node takes the new one
        n = tail_;
        unlink(n);
        erase_from_table(nodes_[n].hash);
      }
      nodes_[n].hash = *it;
      const std::size_t mask = table_.size() - 1;
      std::size_t i = home(*it);
      while (table_[i] != 0) i = (i + 1) & mask;
      table_[i] = n + 1;
    }
    push_front(n);
  }
}

void PrefixIndex::clear() {
  std::fill(table_.begin(), table_.end(), 0u);
  size_ = 0;
  head_ = tail_ = kNone;
}

std::size_t PrefixIndex::capacity_for(double kv_tokens, int block_tokens) {
  if (!(kv_tokens > 0) || block_tokens < 1) return 0;
  return static_cast<std::size_t>(std::floor(kv_tokens / block_tokens));
}

}  // namespace tidegate::routing
