#pragma once
// The work model: demand as prefill work priced in replicas, sized for the TTFT SLO with a
// queueing bound, and a plan that holds what a swing of demand within a cold start needs
// (burst memory), split between active replicas and cheaper warm tiers by promotion time.
#include <string>
#include <vector>

#include "demand.h"
#include "tidegate/scaler/policy.h"

namespace tidegate::scaler::detail {

struct WorkPlan {
  bool any = false;   // the pool has reported work signals (now or before)
  bool lost = false;  // they stopped: the plan holds what it had
  int active = 0;
  bool quiet_gap = false;  // released for a quiet gap: no stabilisation window holds it (quiet_gap.h)
  std::vector<int> tiers;  // per PolicyConfig::tiers
  WorkView view;
  std::string reason_code;
  std::string reason;
};

WorkPlan plan_work(const PolicyConfig& config, PolicyState& state, const PolicyInput& input, double cold_start_s);


}  // namespace tidegate::scaler::detail
