#pragma once
// The work model's measurements: windows over the work samples, the load history with its
// noise, swings and episodes in it, and the price of a request in replica-seconds. Pure.
#include <array>
#include <deque>
#include <string>
#include <vector>

#include "tidegate/scaler/policy.h"

namespace tidegate::scaler::detail {

inline constexpr double kBucketS = 5;  // resolution of the demand history
inline constexpr double kMaxDemandWindowS = 600;  // the long demand window never averages over more

// Work samples within (since, now]: their span of time, arrivals and prompt tokens; over the
// samples that carried both slot signals, requests on replicas x seconds and requests admitted.
struct Window {
  double span = 0, arrivals = 0, tokens = 0;
  double in_flight_s = 0, admitted = 0;
};
Window window(const std::deque<PolicyState::WorkSample>& work, double since);

// Adds `load` (with its standard error) to the 5 s bucket of t; keeps the burst memory (and a
// predictive period) of buckets.
void record_history(const PolicyConfig& config, PolicyState& state, double t, double load, double noise,
                    double cold_start_s);

double median_load(const std::deque<PolicyState::LoadSample>& series);

// First tokens within the TTFT, and in all, of the (t, (met, total)) samples after `since`.
struct FirstTokens {
  double met = 0, total = 0;
};
FirstTokens first_tokens(const std::deque<std::pair<double, std::pair<double, double>>>& ttft, double since);

// Poisson bounds on the miss rate of `f`, `z` standard errors either way (sqrt(misses + 1), so
// that a window without misses still has an upper bound): what chance allows the true rate to
// be. 0 / 0 without first tokens.
struct MissRate {
  double lower = 0, upper = 0;
};
MissRate miss_rate(const FirstTokens& f, double z);
// The share of first tokens the budget leaves unspent, the miss rate taken at its upper bound
// (negative when the window may have spent more than the budget).
inline double unused_budget(const FirstTokens& f, double budget, double z) { return budget - miss_rate(f, z).upper; }

// Notes the active replicas at t (kept over `window_s`) and, when that window was measured
// short of the SLO (`short_of_slo`), the fewest of them while its misses came: a fleet
// measured short. Those are kept over `memory_s`.
void record_held(PolicyState& state, double t, int active, double window_s, bool short_of_slo, double memory_s);

// A fleet size remembered, how long ago it was noted, and (for a hard need) what needed it;
// {0, 0} when none.
struct RememberedFleet {
  int replicas = 0;
  double age_s = 0;
  const char* bound = "";
};
// The largest fleet measured short within the memory.
RememberedFleet largest_short_fleet(const PolicyState& state, double t);

// Notes the replicas the requests' KV or in-flight slots filled at t (`bound` names which, a
// string literal) and forgets what is older than `memory_s`.
void record_hard_need(PolicyState& state, double t, int replicas, const char* bound, double memory_s);
// The largest of them within the memory.
RememberedFleet largest_hard_need(const PolicyState& state, double t);

// Follows the burst under way (`in_burst`: the history's last bucket is above its burst level),
// counting the tick's first tokens (`met` of `total`) into it. A `tail_s` after it ends (its last
// first tokens), it vouches for the fewest replicas it was served with, when the upper bound of
// its miss rate (z standard errors) is within `budget` and no burst in `series` had a higher peak
// (load less z noise): a burst served says nothing of a larger one. Forgotten once no burst has
// ended for `memory_s`.
void record_burst(PolicyState& state, double t, bool in_burst, int active, double met, double total,
                  const std::deque<PolicyState::LoadSample>& series, double z, double budget, double tail_s,
                  double memory_s);
// The fleet that last served the largest burst within the SLO, and how long ago that burst
// ended; {0, 0} when none is remembered.
RememberedFleet last_burst_served(const PolicyState& state, double t);
// The bursts that ended within the memory: how many, and the most first tokens one brought.
struct RememberedBursts {
  int count = 0;
  double most_first_tokens = 0;
};
RememberedBursts remembered_bursts(const PolicyState& state);

// Runs of the history above `level`: the longest finished one, and how long the current one
// (if the last sample is above) has lasted (-1 when it is not above).
struct Episodes {
  double longest_done = 0;
  double current_age = -1;
};
Episodes episodes(const std::deque<PolicyState::LoadSample>& series, double level);

// Prefill seconds of a request of P prompt tokens, h of them cached: its uncached tokens at
// the prefill rate, each dearer by the context it attends to (the cached prefix plus half its
// own part), on the share of a saturated replica's time that prefill gets:
//   s(P) = k1 P + k2 P^2,  k1 = (1 - h) / (C (1 - overhead)),  k2 = k1 (1 + h) / (2 A).
// The mean at the recent mean prompt `m1`; the spread (cv2) from the long-run size buckets,
// scaled so that their mean is m1. Without buckets: exponential sizes (cv2 = 1, E[P^2] = 2 m1^2).
struct Service {
  double mean = 0, cv2 = 1;
};
Service prefill_service(const ReplicaCapacity& capacity, double h, double m1, const std::array<double, 24>& sizes);

// Adds the tick's work and first-token samples to the state (prompt-size moments too) and
// forgets those older than the long demand window and the SLO window.
void record_signals(const PolicyConfig& config, PolicyState& state, const PolicyInput& in);

// The load now, in replicas, from the work samples: arrivals over the long demand window
// (lengthened, up to kMaxDemandWindowS, until it holds enough requests to know the load within
// 10 %) or over the short one when that one is above by more than its own noise, times the
// mean prefill service; 0 for an idle pool. With its standard error (`noise`). Updates the
// state's prefix-cache hit ratio and mean prompt.
struct LoadNow {
  Window long_window;
  Service service;
  double rate = 0;  // arrivals per second over the long window
  double load = 0, noise = 0;
  bool idle = false;
};
LoadNow load_now(const PolicyConfig& config, PolicyState& state, const Signals& signals, double t);

// Largest rise or fall of the load over any window of `horizon_s` that noise does not explain:
// max over windows of (max of load - z noise) - (min of load + z noise); 0 when none.
double largest_swing(const std::deque<PolicyState::LoadSample>& samples, double horizon_s, double z);

// How far the load climbs in one cold start, when noise does not explain the climb: `load` now
// against the history's level 1, 2 and 4 cold starts before `t`, a rise counting when it exceeds
// z standard errors of the difference of the two loads (a slow ramp clears the noise only over a
// longer span), as the largest rise per cold start. 0 when none does, or the history is shorter.
double climb_per_cold_start(const std::deque<PolicyState::LoadSample>& samples, double t, double cold_start_s,
                            double load, double noise, double z);

// Tiers the plan may use, sorted by promotion time: faster than a cold start, cheaper than
// an active replica and than every faster tier. Indices into config.tiers.
std::vector<std::size_t> usable_tiers(const PolicyConfig& config, double cold_start_s);

// Share of a swing the replicas already routed must carry when more can join `promotion_s`
// after the swing is seen, which is `seen_after_s` after it starts: the requests of that time
// stay in their queues, so the routed replicas do (p + seen) seconds of the swing's work within
// (p + seen) + the queue slack. 1 when nothing can queue.
double routed_share(double promotion_s, double seen_after_s, double slack_s);

}  // namespace tidegate::scaler::detail
