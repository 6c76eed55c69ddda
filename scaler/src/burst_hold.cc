#include "burst_hold.h"

#include <algorithm>

#include "demand.h"
#include "target_tracking.h"

namespace tidegate::scaler::detail {

BurstHold burst_hold(const PolicyState& st, double t, int held_now) {
  BurstHold out;
  auto keep = [&](int replicas, std::string why) {
    if (replicas > out.replicas) out = {replicas, "; keeping " + std::to_string(replicas) + ": " + std::move(why)};
  };
  // A fleet the SLO was measured short with inside a burst is what that burst needed at least,
  // whatever the model's estimate of its load (a demand window's average, less its noise,
  // understates a burst's worst seconds): it is not released within the burst memory, as the
  // bursts' modelled load is not. Nor is a fleet whose replicas the requests' KV or in-flight
  // slots filled: the burst memory's history is of prefill load, and a burst of long
  // generations fills slots its prefill does not show.
  const auto short_fleet = largest_short_fleet(st, t);
  const auto hard_need = largest_hard_need(st, t);
  keep(std::min(short_fleet.replicas, held_now), "the SLO was missed with " + std::to_string(short_fleet.replicas) +
                                                     " active in a burst " + fmt("%.0f", short_fleet.age_s) + "s ago");
  keep(std::min(hard_need.replicas, held_now), std::string(hard_need.bound) + " needed the " +
                                                   std::to_string(hard_need.replicas) + " active " +
                                                   fmt("%.0f", hard_need.age_s) + "s ago");
  // A burst measured short beyond chance is kept while bursts go on, as a served one is: the
  // memory of their load forgets it, and smaller bursts would vouch for steps below its fleet.
  keep(std::min(st.burst_short_fleet, held_now),
       "a burst was measured short with " + std::to_string(st.burst_short_fleet) + " active, and bursts go on");
  // Released one burst at a time: the largest burst remembered, served within the SLO, vouches
  // for the fleet it was served with, and for nothing smaller. The next burst may meet one
  // replica fewer, and once one fewer has been measured short, not that either (back to the
  // fleet that served). The modelled peak understates what a burst needs (its worst seconds,
  // and the slots that chunked prefill holds longer), so a release in one step to it meets the
  // next burst short.
  if (const auto served = last_burst_served(st, t); served.replicas > 0) {
    const int shortest = std::max(short_fleet.replicas, st.burst_short_fleet);
    const bool step_was_short = shortest > 0 && shortest + 1 >= served.replicas;
    keep(step_was_short ? served.replicas : served.replicas - 1,
         "the largest burst remembered (" + fmt("%.0f", served.age_s) + "s ago) was served within the SLO by " +
             std::to_string(served.replicas) +
             (step_was_short ? ", and " + std::to_string(shortest) + " were measured short"
                             : ", one replica fewer a burst"));
  }
  return out;
}

}  // namespace tidegate::scaler::detail
