#include "balancer.h"

namespace tidegate::gateway {

int Balancer::pick(BalancerKind kind, const std::vector<Candidate>& c) {
  if (c.empty()) return -1;
  if (c.size() == 1) return 0;
  switch (kind) {
    case BalancerKind::kLeastOutstandingP2C:
    case BalancerKind::kPrefixAware:  // without a prompt to match (ReplicaPool handles the rest)
      // Two random choices, keep the less loaded (per weight): near-best balance without herding
      // every request onto the single least-loaded replica, whose count is stale by the time
      // requests land.
      return routing::least_loaded_of_two(c, rng_());
    case BalancerKind::kRoundRobin: return static_cast<int>(round_robin_++ % c.size());
    case BalancerKind::kWeighted: return weighted_random(c);
  }
  return 0;
}

int Balancer::weighted_random(const std::vector<Candidate>& c) {
  double total = 0;
  for (const auto& x : c) total += x.weight > 0 ? x.weight : 0;
  if (total <= 0) return static_cast<int>(round_robin_++ % c.size());
  std::uniform_real_distribution<double> dist(0, total);
  double r = dist(rng_);
  for (std::size_t i = 0; i < c.size(); ++i) {
    const double w = c[i].weight > 0 ? c[i].weight : 0;
    if (r < w) return static_cast<int>(i);
    r -= w;
  }
  return static_cast<int>(c.size() - 1);
}

}  // namespace tidegate::gateway
