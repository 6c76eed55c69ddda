#pragma once
// The work model: demand as prefill work priced in replicas, sized for the TTFT SLO with a
// queueing bound, and a plan that holds what a swing of demand within a cold start needs
// (burst memory), split between active replicas and cheaper warm tiers by promotion time.
#include <string>
#include <vector>

#include "tidegate/scaler/policy.h"

namespace tidegate::scaler::detail {

struct WorkPlan {
  bool any = false;   // the pool has reported work signals (now or before)
  bool lost = false;  // they stopped: the plan holds what it had
  int active = 0;
  std::vector<int> tiers;  // per PolicyConfig::tiers
  WorkView view;
  std::string reason_code;
  std::string reason;
};

WorkPlan plan_work(const PolicyConfig& config, PolicyState& state, const PolicyInput& input, double cold_start_s);

// Tiers the plan may use, sorted by promotion time: faster than a cold start, cheaper than
// an active replica and than every faster tier. Indices into config.tiers.
std::vector<std::size_t> usable_tiers(const PolicyConfig& config, double cold_start_s);

// Largest rise or fall of the load over any window of `horizon_s` that noise does not explain:
// max over windows of (max of load - z noise) - (min of load + z noise); 0 when none.
double largest_swing(const std::deque<PolicyState::LoadSample>& samples, double horizon_s, double z);

}  // namespace tidegate::scaler::detail
