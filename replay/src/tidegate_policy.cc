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

void TidegatePolicy::control(const ClusterObservation& obs, bool apply, scaler::Actuator& actuator,
                             scaler::RoutingTarget& routing) {
  if (!controller_ || controller_actuator_ != &actuator) {
    scaler::LifecycleConfig lc;
    lc.warm_pool_size = cfg_.warm_pool_size;
    controller_ = std::make_unique<scaler::PoolController>("replay", "replay", lc, actuator, routing);
    controller_actuator_ = &actuator;
  }
  auto in = to_policy_input(obs);
  if (apply) {
    // As the live scaler builds its input: the controller's counts, with warm-pool refills
    // not counted as capacity on the way.
    const auto c = controller_->counts();
    in.active = c.active;
    in.starting = std::max(0, c.starting - std::max(0, cfg_.warm_pool_size - c.warm));
    in.warm = c.warm;
  }
  last_ = scaler::decide(cfg_.policy, state_, in);
  if (!apply) return;
  controller_->step(obs.t, last_.desired);
}

ScaleTarget TidegatePolicy::decide(const ClusterObservation& obs) {
  last_ = scaler::decide(cfg_.policy, state_, to_policy_input(obs));
  return {last_.desired, cfg_.warm_pool_size};
}

}  // namespace tidegate::replay
