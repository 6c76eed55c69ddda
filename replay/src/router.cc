#include "router.h"

namespace tidegate::replay::detail {

std::size_t Router::pick(const std::vector<Eligible>& eligible, const TraceRequest& req) {
  switch (balancer_) {
    case Balancer::kRoundRobin: return round_robin_++ % eligible.size();
    case Balancer::kPrefixAware: {
      candidates_.clear();
      for (const auto& e : eligible) candidates_.push_back({e.in_flight, 1.0, e.routed_prefixes->match(req.blocks)});
      const auto choice = routing::choose_prefix_aware(prefix_aware_, candidates_, rng_());
      if (choice.reason == routing::ChoiceReason::kPrefix) {
        ++prefix_routed_;
        prefix_expected_blocks_ += static_cast<std::int64_t>(choice.matched_blocks);
      }
      return choice.index;
    }
    case Balancer::kIdeal:
    case Balancer::kLeastOutstanding: break;
  }
  std::size_t best = 0;
  for (std::size_t i = 1; i < eligible.size(); ++i)
    if (eligible[i].in_flight < eligible[best].in_flight) best = i;
  return best;
}

}  // namespace tidegate::replay::detail
