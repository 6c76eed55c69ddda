#pragma once
// Under bursty demand, what measurements of past bursts keep active whatever the bursts' modelled
// load asks for: a fleet the SLO was measured short with in a burst (by a demand window, for the
// burst memory; by a whole burst beyond chance, while bursts go on), one whose KV or in-flight
// slots the requests filled, and one step below the fleet that served the largest burst
// remembered within the SLO (that fleet itself while the SLO window's unused budget does not
// cover what the step risks).
#include <string>

#include "demand.h"
#include "tidegate/scaler/policy.h"

namespace tidegate::scaler::detail {

struct BurstHold {
  int replicas = 0;  // active replicas to keep; 0 when nothing is remembered
  std::string why;   // "; keeping N: ..." for the decision's reason
};

// `held_now`: the replicas routed or on their way. The short and filled fleets are only held,
// never started for; the step below a served fleet is started for when the fleet has fallen
// under it. The step is taken only when the SLO window's unused miss budget covers what it
// risks (burst_hold.cc); `window` is that window's first tokens, as the SLO loop measured them.
BurstHold burst_hold(const PolicyConfig& cfg, const PolicyState& state, double t, int held_now,
                     const FirstTokens& window);

}  // namespace tidegate::scaler::detail
