#pragma once
// Bursts that keep time: when the gaps between the bursts remembered say how soon the next can
// come, the fleet held for it need not idle through the whole gap. It is released once a burst
// is over and started again a cold start before the earliest the next burst is expected, with
// the chance that it comes earlier paid for by the SLO window's unused miss budget. Pure.
#include <string>

#include "demand.h"
#include "tidegate/scaler/policy.h"

namespace tidegate::scaler::detail {

struct QuietGap {
  bool known = false;    // enough gaps, and budget to spare, to time the next burst
  int gaps = 0;          // gaps between the bursts remembered
  double mean_gap = 0, sd_gap = 0;  // from a burst's end (its load fell) to the next start
  double mean_cycle = 0;            // start to start
  double risk = 0;       // chance allowed, per burst, that it comes before `onset`
  double onset = 0;      // the next burst's start, at the earliest (absolute time)
  double restore_t = 0;  // when the fleet must be started again to be ready by then
};

// `spare`: first tokens the SLO window may still miss (its budget less the misses at their upper
// bound); `window_s`: that window; `lag_s`: how late a burst's start is seen (the bursts are timed
// by the load history, so a start is noted that much after the requests began).
QuietGap quiet_gap(const PolicyState& state, double spare, double window_s, double cold_start_s, double lag_s);

// One tick of the release, under bursty demand: the plan's active replicas and why they changed.
struct GapInputs {
  double t = 0, cold_start_s = 0;
  FirstTokens window;    // the SLO window's first tokens
  bool between_bursts = false;  // no burst under way, nor in the tail that finishes one
  bool vouched = false;  // the window's miss rate within the budget at its upper bound
  bool climbing = false; // a load rising beyond its noise is on its way somewhere, gap or not
  int base = 0;          // what the load now needs (and what binds now)
  int planned = 0;       // the plan's active replicas, every hold included
  int held_now = 0;      // routed or on their way
};
struct GapStep {
  int active = 0;         // the plan's active replicas after the step
  bool released = false;  // out for a quiet gap: no stabilisation window may hold the release
  std::string why;        // for the decision's reason; empty when the step changed nothing
};
// Released to `base` while the gap is quiet (and was, by a cold start at least, when the release
// began); then back to what the bursts' measurements hold for the fleet that was out (burst_hold.h),
// not only for the few that stayed. Off with `policy.quiet_gaps: false` (a release under way
// still comes back).
GapStep quiet_gap_step(const PolicyConfig& config, PolicyState& state, const GapInputs& in);

// Upper quantile of Student's t with `dof` degrees of freedom: the t for which P(T > t) = tail.
// (0, 0.5] -> [0, inf); Boost.Math's.
double student_t_upper(double tail, double dof);

}  // namespace tidegate::scaler::detail
