#include "router.h"

namespace tidegate::replay::detail {

std::size_t router_index_blocks(const ReplayOptions& options, const sim::TimingParams& engine, std::int32_t block_tokens) {
  if (options.balancer != Balancer::kPrefixAware || block_tokens <= 0 || !engine.prefix_caching) return 0;
  return routing::PrefixIndex::capacity_for(static_cast<double>(engine.kv_capacity_tokens), engine.prefix_block_tokens);
}

void Router::submit(sim::TimingModel& engine, routing::PrefixIndex& routed_prefixes, std::size_t id,
                    const TraceRequest& req, double t) {
  routed_prefixes.insert(req.blocks);
  if (balancer_ == Balancer::kIdeal)
    engine.submit_externally_cached(id, req.prompt_tokens, req.output_tokens, t, ideal_cache_.admit(req));
  else
    engine.submit(id, req.prompt_tokens, req.output_tokens, t, req.blocks);
}

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
