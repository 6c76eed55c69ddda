#include "tidegate/replay/tidegate_policy.h"

namespace tidegate::replay {

TidegatePolicy::TidegatePolicy(TidegatePolicyConfig config, std::string name)
    : cfg_(std::move(config)), name_(std::move(name)) {
  scaler::validate(cfg_.policy);
}

scaler::PolicyInput to_policy_input(const ClusterObservation& obs) {
  scaler::PolicyInput in;
  in.t = obs.t;
  in.signals.concurrency = static_cast<double>(obs.in_flight + obs.queue_depth);
  in.signals.queue = static_cast<double>(obs.queue_depth);
  if (obs.active > 0) {
    in.signals.kv_usage = obs.kv_usage;
    in.signals.gpu_util = obs.busy_fraction;
  }
  in.active = obs.active;
  // The policy counts capacity on the way; promotions and warm-bound loads are not that.
  in.starting = obs.starting_for_active;
  in.warm = obs.warm;
  return in;
}

ScaleTarget TidegatePolicy::decide(const ClusterObservation& obs) {
  last_ = scaler::decide(cfg_.policy, state_, to_policy_input(obs));
  return {last_.desired, cfg_.warm_pool_size};
}

}  // namespace tidegate::replay
