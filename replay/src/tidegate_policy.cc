#include "tidegate/replay/tidegate_policy.h"

#include <algorithm>

namespace tidegate::replay {

TidegatePolicy::TidegatePolicy(TidegatePolicyConfig config, std::string name)
    : cfg_(std::move(config)), name_(std::move(name)) {
  scaler::validate(cfg_.policy);
}

scaler::PolicyInput to_policy_input(const ClusterObservation& obs) {
  scaler::PolicyInput in;
  in.t = obs.t;
  auto& s = in.signals;
  s.concurrency = static_cast<double>(obs.in_flight + obs.queue_depth);
  s.queue = static_cast<double>(obs.queue_depth);
  if (obs.active > 0) {
    s.kv_usage = obs.kv_usage;
    s.gpu_util = obs.busy_fraction;
  }
  // The work signals the gateway and the engines' counters give the live scaler.
  s.arrivals = static_cast<double>(obs.arrivals);
  s.arrival_prompt_tokens = static_cast<double>(obs.arrival_prompt_tokens);
  s.arrival_prompt_sizes = obs.arrival_prompt_sizes;
  if (obs.prefix_queried) s.prefix_hit_ratio = obs.prefix_hit_ratio;
  s.prefill_backlog_tokens = static_cast<double>(obs.queued_prompt_tokens + obs.engine_backlog_tokens);
  s.kv_used_tokens = static_cast<double>(obs.kv_used_tokens);
  s.in_flight = static_cast<double>(obs.in_flight);
  s.ttft_met = static_cast<double>(obs.first_tokens_in_slo);
  s.ttft_total = static_cast<double>(obs.first_tokens);
  if (obs.cold_start_s > 0) in.cold_start_s = obs.cold_start_s;
  in.active = obs.active;
  // The policy counts capacity on the way; promotions and warm-bound loads are not that.
  in.starting = obs.starting_for_active;
  in.warm = obs.warm;
  return in;
}

void TidegatePolicy::control(const ClusterObservation& obs, bool apply, scaler::Actuator& actuator,
                             scaler::RoutingTarget& routing) {
  if (!controller_ || controller_actuator_ != &actuator) {
    scaler::LifecycleConfig lc;
    lc.warm_pool_size = cfg_.warm_pool_size;
    lc.max_replicas = cfg_.policy.max_replicas;  // as live: the warm pool counts within it
    controller_ = std::make_unique<scaler::PoolController>("replay", "replay", lc, actuator, routing);
    controller_actuator_ = &actuator;
  }
  auto in = to_policy_input(obs);
  const auto c = controller_->counts();
  if (apply && (c.active + c.starting + c.warm + c.draining) > 0) {
    // As the live scaler builds its input: the controller's counts, capacity on the way as
    // scaler::capacity_on_the_way counts it. (Before its first step the controller has not
    // adopted the running fleet yet: the fleet as observed is the input then.)
    in.active = c.active;
    in.starting = scaler::capacity_on_the_way(c, controller_->warm_target());
    in.warm = c.warm;
  }
  last_ = scaler::decide(cfg_.policy, state_, in);
  if (cfg_.record_decisions) log_.push_back(last_);
  if (!apply) return;
  controller_->step(obs.t, last_.desired, nullptr, last_.desired_tiers.empty() ? 0 : last_.desired_tiers.front());
}

ScaleTarget TidegatePolicy::decide(const ClusterObservation& obs) {
  last_ = scaler::decide(cfg_.policy, state_, to_policy_input(obs));
  if (cfg_.record_decisions) log_.push_back(last_);
  return {last_.desired, cfg_.warm_pool_size};
}

scaler::ReplicaCapacity capacity_from_profile(const ReplicaProfile& p) {
  scaler::ReplicaCapacity c;
  const auto& t = p.timing;
  c.prefill_tokens_per_s = t.prefill_tokens_per_s;
  c.attention_context_tokens = t.prefill_attention_context_tokens;
  // A saturated step: a full token budget of prefill plus the decode part.
  const double budget_s = t.max_num_batched_tokens > 0 ? static_cast<double>(t.max_num_batched_tokens) / t.prefill_tokens_per_s : 0;
  c.step_s = budget_s + t.decode_base_s;
  c.kv_tokens = static_cast<double>(t.kv_capacity_tokens);
  c.max_in_flight = p.slots_per_replica;
  return c;
}

}  // namespace tidegate::replay
