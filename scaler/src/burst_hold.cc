#include "burst_hold.h"

#include <algorithm>

#include "demand.h"
#include "target_tracking.h"

namespace tidegate::scaler::detail {

BurstHold burst_hold(const PolicyConfig& cfg, const PolicyState& st, double t, int held_now,
                     const FirstTokens& window) {
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
  //
  // A step is an experiment on the next burst, and what it risks is part of that burst. Bursts
  // of one process differ in size: among n remembered, the next is larger than all of them with
  // chance 1/(n+1), and one replica below the fleet that served the largest yet may meet it short
  // (six-hour azure on/off at load 1.0: 17 instead of 18 met a record burst with a fifth of its
  // 5,128 first tokens late). So the step is taken only when the SLO window's unused miss budget
  // (at the upper bound of its miss rate) covers that chance times the most first tokens a
  // remembered burst brought, all counted late: an upper bound, as no model of the burst says
  // how many would be. Many bursts remembered, each a small share of the window's traffic, allow
  // the step as before; few, each a large share, keep the fleet that served while bursts go on.
  if (const auto served = last_burst_served(st, t); served.replicas > 0) {
    const int shortest = std::max(short_fleet.replicas, st.burst_short_fleet);
    const bool step_was_short = shortest > 0 && shortest + 1 >= served.replicas;
    const auto bursts = remembered_bursts(st);
    const double spare =
        std::max(0.0, unused_budget(window, 1 - cfg.slo.attainment, cfg.noise_z) * window.total);
    const double risk = bursts.most_first_tokens / (bursts.count + 1);
    const std::string served_by = "the largest burst remembered (" + fmt("%.0f", served.age_s) +
                                  "s ago) was served within the SLO by " + std::to_string(served.replicas);
    if (step_was_short)
      keep(served.replicas, served_by + ", and " + std::to_string(shortest) + " were measured short");
    else if (risk > spare)
      keep(served.replicas, served_by + "; one fewer would risk " + fmt("%.0f", risk) + " late first tokens (" +
                                fmt("%.0f", bursts.most_first_tokens) + " in a burst, 1 in " +
                                std::to_string(bursts.count + 1) + " that the next is the largest yet), " +
                                fmt("%.0f", spare) + " to spare in the SLO window");
    else
      keep(served.replicas - 1, served_by + ", one replica fewer a burst");
  }
  return out;
}

}  // namespace tidegate::scaler::detail
