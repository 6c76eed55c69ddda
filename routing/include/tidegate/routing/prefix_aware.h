#pragma once
// Prefix-cache-aware replica choice (issue 20): a pure function of the candidates' load and of
// how much of a request's prompt each one is believed to hold in its KV prefix cache, so that
// tidegate-replay (virtual time) and, later, the gateway run the very same code.
//
// Engines with automatic prefix caching (vLLM, SGLang, llama.cpp's slots) skip the prefill of
// prompt blocks they still hold; least-loaded routing scatters a conversation's turns and a
// shared document over every replica, so each of them prefills it again. Routing to the
// replica with the longest match keeps that work done once, and a bound on load keeps the
// popular prefix from turning one replica into a hot spot.
#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <string_view>
#include <unordered_map>

#include "tidegate/routing/prefix_index.h"

namespace tidegate::routing {

struct Candidate {
  int outstanding = 0;            // requests in flight on it (and queued for it)
  double weight = 1.0;            // relative capacity (a bigger replica takes more)
  std::size_t matched_blocks = 0; // PrefixIndex::match of the request's prompt
};

struct PrefixAwareConfig {
  // Bounded load (consistent hashing with bounded loads, Mirrokni, Thorup and Zadimoghaddam
  // 2018): a replica may take the request only while its load, after it, is within
  // load_bound x its weighted share of the fleet's load (rounded up), so no replica runs more
  // than (1 + epsilon) times the mean, whatever prefix every request shares.
  double load_bound = 1.25;
  // ... except that a replica is never over its bound while it would hold at most this many
  // requests: at such loads an engine's continuous batching takes one more at little cost, and
  // the cache hit (or the session's replica) is worth more; the rule is for hot spots, and a
  // strict one would also turn requests away on a count the gateway has not yet lowered (a
  // client's next turn can arrive before its last answer's slot is released).
  int min_bound = 2;
  // Matches shorter than this are not worth a less loaded replica: least-loaded decides.
  std::size_t min_match_blocks = 1;
};

enum class ChoiceReason : std::uint8_t {
  kPrefix,       // the longest match within the bound
  kLeastLoaded,  // no match worth routing for: power-of-two least loaded
  kBounded,      // a longer match was over its bound; the longest within it (or least loaded)
};
constexpr std::string_view to_string(ChoiceReason r) {
  return r == ChoiceReason::kPrefix ? "prefix" : r == ChoiceReason::kLeastLoaded ? "least_loaded" : "bounded";
}

struct Choice {
  int index = -1;  // into the candidates; -1 when there are none
  std::size_t matched_blocks = 0;
  ChoiceReason reason = ChoiceReason::kLeastLoaded;
};

// `random` drives the power-of-two fallback and breaks ties (pass a fresh random number per
// call; the same inputs give the same choice).
Choice choose_prefix_aware(const PrefixAwareConfig& config, std::span<const Candidate> candidates,
                           std::uint64_t random);

// Whether candidate i may take one more request under the bounded-load rule.
bool within_load_bound(const PrefixAwareConfig& config, std::span<const Candidate> candidates, std::size_t i);

// Sessions pinned to replicas (session affinity): an LRU of session key -> replica key,
// bounded, the least recent session forgotten first.
class SessionTable final {
 public:
  explicit SessionTable(std::size_t capacity) : capacity_(capacity) {}
  // The replica the session was pinned to (0 when none); refreshes its recency.
  std::uint64_t find(std::uint64_t session);
  void pin(std::uint64_t session, std::uint64_t replica);
  void forget_replica(std::uint64_t replica);  // a replica removed, ejected or restarted
  void set_capacity(std::size_t capacity);
  std::size_t size() const { return where_.size(); }

 private:
  void trim();
  std::size_t capacity_;
  std::list<std::pair<std::uint64_t, std::uint64_t>> lru_;  // most recent first
  std::unordered_map<std::uint64_t, std::list<std::pair<std::uint64_t, std::uint64_t>>::iterator> where_;
};

// Power of two choices on load per weight, the fallback above and the gateway's default.
int least_loaded_of_two(std::span<const Candidate> candidates, std::uint64_t random);

}  // namespace tidegate::routing
