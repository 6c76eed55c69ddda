// A standby tier under bursts: once a burst has begun, all of the standby is woken at once,
// not a step at a time as the demand windows catch up with it; while the starting fleet is held
// as a possible burst, a climb to the burst level is taken for that burst.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "tidegate/scaler/policy.h"
#include "work_model_inputs.h"

namespace tidegate::scaler {
namespace {

using work_inputs::burst_rate;
using work_inputs::tick;
using work_inputs::work_config;

PolicyConfig bursty_config(bool tier) {
  auto cfg = work_config();
  cfg.slo.ttft_s = 20;  // a 5 s promotion fits in the budget
  if (tier) cfg.tiers = {{"sleeping", 0.2, 5}};
  return cfg;
}

// Runs `rate` from t = `from` up to `until` (exclusive), each decision applied at once.
template <class Rate>
Decision run(const PolicyConfig& cfg, PolicyState& st, Rate rate, int from, int until, int* active) {
  Decision d;
  for (int t = from; t < until; ++t) {
    d = decide(cfg, st, tick(t, rate(t), 1000, *active));
    *active = d.desired;
  }
  return d;
}
Decision run(const PolicyConfig& cfg, PolicyState& st, int until, int* active) {
  return run(cfg, st, burst_rate, 0, until, active);
}

// Runs `rate` from `from` until a decision wakes the standby, at most `within` seconds; that
// decision is returned (and not applied), with the seconds it took.
template <class Rate>
std::pair<Decision, int> until_standby_woken(const PolicyConfig& cfg, PolicyState& st, Rate rate, int from, int within,
                                             int* active, const std::string& woken = "in a burst: standby woken") {
  Decision d;
  int t = from;
  for (; t < from + within; ++t) {
    d = decide(cfg, st, tick(t, rate(t), 1000, *active));
    if (d.reason.find(woken) != std::string::npos) break;
    *active = d.desired;
  }
  return {d, t - from};
}

TEST(Standby, ABurstThatHasBegunWakesAllOfTheStandbyAtOnce) {
  // The burst's own fleet: what the same history holds active without a tier. Both runs start
  // there, as an operator's fleet sized for the bursts would.
  PolicyState plain_st;
  int plain_active = 12;
  const int burst_fleet = run(bursty_config(false), plain_st, 1500, &plain_active).desired;
  const auto cfg = bursty_config(true);
  PolicyState st;
  int active = 12;
  // The gap before the sixth burst (t = 1500): most of the fleet asleep.
  const auto gap = run(cfg, st, 1500, &active);
  ASSERT_GT(gap.desired_tiers.at(0), 0) << gap.reason;
  ASSERT_LT(active, burst_fleet) << gap.reason;
  // The burst begins. The demand windows see it a step at a time, and the routed part of the
  // plan grows with them; once what is needed now reaches the level that marks a burst in the
  // history, one decision wakes at least the burst's own fleet, not what the windows show so far.
  const auto [d, took] = until_standby_woken(cfg, st, burst_rate, 1500, 30, &active);
  EXPECT_LE(took, 10) << d.reason;
  EXPECT_LT(active, burst_fleet) << "the windows alone had already asked for the whole fleet";
  EXPECT_GE(d.desired, burst_fleet) << d.reason;
}

TEST(Standby, WhileLearningAClimbToTheBurstLevelWakesTheHeldStartingFleet) {
  // 40 req/s (4 replicas of prefill load) for ten minutes, then 80: a swing no larger than the
  // usual level, so the history cannot yet call it a burst. The starting 12 are held as a
  // possible one, part of them asleep.
  auto cfg = bursty_config(true);
  cfg.hold_starting_fleet = true;
  auto rate = [](int t) { return t < 600 ? 40.0 : 80.0; };
  PolicyState st;
  int active = 12;
  const auto calm = run(cfg, st, rate, 0, 600, &active);
  ASSERT_GT(calm.desired_tiers.at(0), 0) << "calm: part of the held fleet sleeps. " << calm.reason;
  ASSERT_EQ(calm.desired + calm.desired_tiers.at(0), 12) << calm.reason;
  const auto [d, took] = until_standby_woken(cfg, st, rate, 600, 60, &active,
                                             "a climb while the starting fleet is held as a possible burst: standby woken");
  EXPECT_LE(took, 15) << d.reason;
  EXPECT_EQ(d.desired_tiers.at(0), 0) << d.reason;
  EXPECT_EQ(d.desired, 12) << "the whole held fleet at once. " << d.reason;
}

}  // namespace
}  // namespace tidegate::scaler
