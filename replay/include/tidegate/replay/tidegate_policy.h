#pragma once
// Tidegate's own policy in the replay: the live scaler's decide() (tidegate_scaler), fed with
// the simulated gateway and engine signals once per sample, exactly as the live scaler ticks.
// The warm pool size is the lifecycle controller's setting; the replay's actuator keeps it.
#include <memory>
#include <string>

#include "tidegate/replay/policy.h"
#include "tidegate/replay/replay.h"
#include "tidegate/scaler/lifecycle.h"
#include "tidegate/scaler/policy.h"

namespace tidegate::replay {

struct TidegatePolicyConfig {
  scaler::PolicyConfig policy;  // the scaler's defaults unless a config file says otherwise
  int warm_pool_size = 0;
  double tick_s = 1;            // the live scaler's control loop period
  // true: the live lifecycle controller (scaler::PoolController) owns starts, promotions,
  // drains and the warm pool; false: the replay's own actuator does (same as the baselines).
  bool lifecycle_controller = true;
  bool record_decisions = false;  // keep every decision (for decisions.csv)
};

class TidegatePolicy final : public ScalingPolicy {
 public:
  TidegatePolicy(TidegatePolicyConfig config, std::string name);
  std::string name() const override { return name_; }
  double decide_period_s() const override { return cfg_.tick_s; }
  ScaleTarget decide(const ClusterObservation& obs) override;
  bool drives_lifecycle() const override { return cfg_.lifecycle_controller; }
  void control(const ClusterObservation& obs, bool apply, scaler::Actuator& actuator,
               scaler::RoutingTarget& routing) override;
  const scaler::Decision& last_decision() const { return last_; }
  const std::vector<scaler::Decision>& decisions() const { return log_; }

 private:
  TidegatePolicyConfig cfg_;
  std::string name_;
  scaler::PolicyState state_;
  scaler::Decision last_;
  std::vector<scaler::Decision> log_;
  std::unique_ptr<scaler::PoolController> controller_;
  const scaler::Actuator* controller_actuator_ = nullptr;  // the fleet controller_ drives
};

// The signals the live gateway/engines would report, from a replay observation.
scaler::PolicyInput to_policy_input(const ClusterObservation& obs);

// The work model's replica capacity for a profile: what a user would set from a benchmark of
// that replica (its prefill rate, attention constant, saturated step, KV and gateway slots).
scaler::ReplicaCapacity capacity_from_profile(const ReplicaProfile& profile);

}  // namespace tidegate::replay
