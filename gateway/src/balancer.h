#pragma once
// Replica choice as pure functions of the candidates' load and weight, so they are unit
// tested without sockets. The pool filters out replicas that cannot take a request.
#include <cstdint>
#include <random>
#include <vector>

#include "tidegate/gateway/config.h"
#include "tidegate/routing/prefix_aware.h"

namespace tidegate::gateway {

// {outstanding, weight, matched_blocks}: the routing library's, so prefix-aware choice and the
// plain balancers read the same candidates.
using Candidate = routing::Candidate;

class Balancer final {
 public:
  explicit Balancer(std::uint64_t seed = std::random_device{}()) : rng_(seed) {}
  // Index into `candidates` (all eligible), or -1 when empty.
  int pick(BalancerKind kind, const std::vector<Candidate>& candidates);
  std::uint64_t random() { return rng_(); }

 private:
  int weighted_random(const std::vector<Candidate>& c);
  std::mt19937_64 rng_;
  std::uint64_t round_robin_ = 0;
};

}  // namespace tidegate::gateway
