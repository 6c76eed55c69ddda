#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tidegate::routing {

// What the router believes one replica's prefix cache holds: an LRU of the chained block
// hashes of the prompts routed to it.
//
// Blocks are chained (block i's hash covers every token of blocks 0..i), and every request
// that holds block j also holds blocks 0..j-1, so an earlier block is always at least as
// recent as a later one of the same chain: LRU eviction keeps each chain's held part a prefix.
// match() relies on that and binary-searches for the end of the match.
//
// Flat and allocation-free after construction (the gateway touches it on every request): a
// fixed array of nodes linked by index into the LRU list, and an open-addressing table of
// node indexes with linear probing and backward-shift deletion. 24 bytes a block.
class PrefixIndex final {
 public:
  explicit PrefixIndex(std::size_t capacity_blocks);

  // Leading blocks of `blocks` held here.
  std::size_t match(std::span<const std::uint64_t> blocks) const;
  // A request routed here: its blocks become the most recent; the least recent go beyond the capacity.
  void insert(std::span<const std::uint64_t> blocks);
  void clear();
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return nodes_.size(); }

  // Capacity in blocks for a replica with `kv_tokens` of KV cache and blocks of `block_tokens`:
  // the whole KV cache, the most an engine can keep (vLLM frees cached blocks only when running
  // sequences need them, so under load it keeps less, and the index then over-estimates: a
  // predicted hit becomes a partial miss, never a wrong answer).
  static std::size_t capacity_for(double kv_tokens, int block_tokens);

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  struct Node {
    std::uint64_t hash;
    std::uint32_t prev, next;  // towards the most / least recent
  };
  std::size_t home(std::uint64_t hash) const;
  std::uint32_t find(std::uint64_t hash) const;  // node index, or kNone
  void unlink(std::uint32_t n);
  void push_front(std::uint32_t n);
  void erase_from_table(std::uint64_t hash);

  std::vector<Node> nodes_;
  std::vector<std::uint32_t> table_;  // node index + 1; 0 = empty
  int shift_ = 64;                    // home() = (hash * golden) >> shift_
  std::size_t size_ = 0;
  std::uint32_t head_ = kNone, tail_ = kNone;  // most / least recent
};

}  // namespace tidegate::routing
