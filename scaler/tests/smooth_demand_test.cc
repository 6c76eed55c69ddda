// Under smooth demand, while the held fleet is measured to meet the SLO (the Poisson upper bound
// of its miss rate within the budget), the model starts nothing on weaker evidence than that:
// not for the burst memory's margin for a swing, nor for a load within its noise of what the
// held fleet serves. A load clearly above it still starts what it needs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tidegate/scaler/policy.h"
#include "work_model_inputs.h"

namespace tidegate::scaler {
namespace {

using work_inputs::tick;

PolicyConfig config() { return work_inputs::short_memory_config(); }

// The decision at `at` after a second-by-second run of `rate(t)` requests of 1000 tokens on a
// fleet of `active`, in which `met` of the first tokens meet the TTFT.
template <class Rate>
Decision decision_at(int at, Rate rate, int active, double met) {
  const auto cfg = config();
  PolicyState st;
  Decision d;
  for (int t = 0; t <= at; ++t) d = decide(cfg, st, tick(t, rate(t), 1000, active, met));
  return d;
}

// 4 replicas of prefill load for 120 s, then 5.5 for 120 s, and so on: a swing smaller than the
// usual level, so not bursty. An operator's fleet of 5.
Decision alternating_at(double met, int at) {
  return decision_at(at, [](int t) { return t % 240 < 120 ? 40.0 : 55.0; }, 5, met);
}

TEST(SmoothDemand, TheSwingMarginIsNotStartedWhileTheHeldFleetIsMeasuredToMeetTheSlo) {
  // In a low phase, 5 replicas serve the load; the margin for the swing to 5.5 would add one.
  const auto d = alternating_at(1.0, 1070);
  EXPECT_EQ(d.desired, 5) << d.reason;
  EXPECT_EQ(d.reason_code, "slo_met") << d.reason;
  EXPECT_NE(d.reason.find("not starting 1: smooth demand, the held 5 meet the SLO"), std::string::npos) << d.reason;
}

TEST(SmoothDemand, TheSwingMarginIsStartedWhenTheMeasurementCannotVouchForTheFleet) {
  // 0.85% of first tokens late against a 1% budget: not short of the SLO by more than chance,
  // but not proven within it either, so the margin stands.
  const auto d = alternating_at(0.9915, 1070);
  EXPECT_EQ(d.desired, 6) << d.reason;
  EXPECT_EQ(d.reason.find("smooth demand"), std::string::npos) << d.reason;
}

TEST(SmoothDemand, ALoadClearlyAboveWhatTheFleetServesStillStartsReplicas) {
  // In a high phase the load itself needs 6, by more than its noise: the measurement does not
  // hold that back.
  const auto d = alternating_at(1.0, 890);
  EXPECT_EQ(d.desired, 6) << d.reason;
  EXPECT_EQ(d.reason_code, "work_demand") << d.reason;
}

// A steady 26 req/s of 1000 tokens (2.6 replicas of load) on 3 replicas, for 700 s; `signals`:
// whether first tokens are counted, and `met` of them in time; optionally a standby tier, and a
// cold start other than 60 s.
Decision steady(bool signals, double met, bool standby_tier = false, double cold_start_s = 60) {
  auto cfg = config();
  cfg.cold_start_s = cold_start_s;
  if (standby_tier) cfg.tiers = {{"sleeping", 0.2, 5}};
  PolicyState st;
  Decision d;
  for (int t = 0; t < 700; ++t) {
    auto in = tick(t, 26, 1000, 3, met);
    if (!signals) in.signals.ttft_total.reset(), in.signals.ttft_met.reset();
    d = decide(cfg, st, in);
  }
  return d;
}

TEST(SmoothDemand, ALoadWithinItsNoiseOfTheEdgeStartsOnlyWithoutTheMeasurementsWord) {
  // The queueing bound sizes 2.6 replicas of load at 4 (half the miss budget); 3 serve it less
  // three standard errors of the minute's estimate.
  const auto model = steady(false, 1.0);
  ASSERT_EQ(model.desired, 4) << model.reason;
  // Every first token in time: the measurement vouches for the 3.
  const auto vouched = steady(true, 1.0);
  EXPECT_EQ(vouched.desired, 3) << vouched.reason;
  EXPECT_NE(vouched.reason.find("the held 3 meet the SLO (100.00%) and serve the load less its noise"),
            std::string::npos)
      << vouched.reason;
  // 0.9% late: within the budget as far as chance tells, but not proven so; the model's 4.
  const auto unproven = steady(true, 0.991);
  EXPECT_EQ(unproven.desired, 4) << unproven.reason;
}

TEST(SmoothDemand, AReplicaIsNotStartedForMissesTheUnusedBudgetAbsorbs) {
  // 0.2% late: the measurement vouches for the 3 and leaves 108 first tokens of the window's
  // budget unused (its misses at their upper bound). The model would size the load less its
  // noise at 4 for the budget's share it spends at any moment, but what it gives the 3 at the
  // load (2.6) over the cold start a replica takes to come fits those 108: the 3 are kept.
  const auto paced = steady(true, 0.998);
  EXPECT_EQ(paced.desired, 3) << paced.reason;
  EXPECT_EQ(paced.reason_code, "slo_met") << paced.reason;
  EXPECT_NE(paced.reason.find("late first tokens in a cold start, within the 108 the SLO window has to spare"),
            std::string::npos)
      << paced.reason;
  // 0.4% late leaves 70 to spare: fewer than the model gives the 3 over a 60 s cold start, so the
  // fourth is started; over a 30 s one they fit.
  EXPECT_EQ(steady(true, 0.996).desired, 4);
  EXPECT_EQ(steady(true, 0.996, false, 30).desired, 3);
}

// 20 req/s on 3 replicas, every first token in time, for 600 s; then a climb of `per_s` req/s
// each second (a morning ramp).
Decision ramp_at(double per_s, int at) {
  return decision_at(at, [per_s](int t) { return 20 + std::max(0, t - 600) * per_s; }, 3, 1.0);
}

TEST(SmoothDemand, AClimbIsNotTakenForNoise) {
  // 90 s into a climb of 6 req/s a minute the minute's load is 2.6 replicas, which the held 3
  // serve less its noise (as in the steady case above), but it rose by more than noise explains
  // over the last cold start: the fleet is held at what the load needs a cold start on if the
  // climb goes on. The measured attainment was earned at the lower load.
  const auto d = ramp_at(0.1, 690);
  EXPECT_GE(d.desired, 4) << d.reason;
  EXPECT_EQ(d.reason.find("serve the load less its noise"), std::string::npos) << d.reason;
  // A slower climb (1.5 req/s a minute) rises by less than noise within one cold start, but not
  // within four: 4.5 minutes in (2.6 replicas of load), the held 3 are not enough for it either.
  const auto slower = ramp_at(0.025, 870);
  EXPECT_GE(slower.desired, 4) << slower.reason;
  EXPECT_EQ(slower.reason.find("serve the load less its noise"), std::string::npos) << slower.reason;
  EXPECT_EQ(slower.reason.find("smooth demand"), std::string::npos) << slower.reason;
  // The same level reached slowly (a climb of 0.6 req/s a minute, within noise over four cold
  // starts) is held at 3 as before.
  const auto slow = ramp_at(0.01, 1200);
  EXPECT_EQ(slow.desired, 3) << slow.reason;
  EXPECT_NE(slow.reason.find("smooth demand, the held 3 meet the SLO"), std::string::npos) << slow.reason;
}

TEST(SmoothDemand, InAClimbTheBudgetMustCoverTheHighestLoadItReaches) {
  // A wave of 1.4 to 3.6 replicas of load, 30 minutes a period, on the held 3, every first token
  // in time. Halfway up its second climb (2.5, rising) the model wants 4 for what a cold start
  // of the climb brings, and the misses it gives the 3 there over a cold start would fit the
  // window's unused budget; but the climb goes on to the crest the history remembers (3.6),
  // which the 3 cannot serve, and a start put off now puts off every later one: the 4th starts.
  auto cfg = config();
  cfg.burst_memory_s = 3600;
  auto wave = [](int t) {
    const double phase = std::fmod(t, 1800.0) / 900.0;
    return 14 + 22 * (phase < 1 ? phase : 2 - phase);
  };
  PolicyState st;
  Decision d;
  for (int t = 0; t <= 2250; ++t) d = decide(cfg, st, tick(t, wave(t), 1000, 3, 1.0));
  EXPECT_GE(d.desired, 4) << d.reason;
  EXPECT_EQ(d.reason.find("has to spare"), std::string::npos) << d.reason;
  // A climb beyond anything remembered reaches, as far as anyone knows, what a cold start of it
  // brings: there the budget pays for one cold start, as for a crest.
  const auto ramp = ramp_at(0.02, 900);
  EXPECT_EQ(ramp.desired, 3) << ramp.reason;
  EXPECT_NE(ramp.reason.find("(as high as the load climbs) the model gives them"), std::string::npos) << ramp.reason;
}

TEST(SmoothDemand, OffWithAStandbyTier) {
  // A pool with a standby tier keeps its margin asleep there and wakes it in seconds: the rule,
  // which saves cold starts, would keep the tier's replicas asleep too (a starting fleet's
  // standby through a burst, on the held-out tier rows). The model's 4 stand.
  const auto d = steady(true, 1.0, true);
  EXPECT_EQ(d.desired, 4) << d.reason;
  EXPECT_EQ(d.reason.find("smooth demand"), std::string::npos) << d.reason;
}

}  // namespace
}  // namespace tidegate::scaler
