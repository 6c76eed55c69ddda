// A standby tier under bursts: once a burst has begun, all of the standby is woken at once,
// not a step at a time as the demand windows catch up with it.
#include <gtest/gtest.h>

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

// Runs the bursts from t = 0 up to `until` (exclusive), each decision applied at once.
Decision run(const PolicyConfig& cfg, PolicyState& st, int until, int* active) {
  Decision d;
  for (int t = 0; t < until; ++t) {
    d = decide(cfg, st, tick(t, burst_rate(t), 1000, *active));
    *active = d.desired;
  }
  return d;
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
  Decision d;
  int t = 1500;
  for (; t < 1530; ++t) {
    d = decide(cfg, st, tick(t, burst_rate(t), 1000, active));
    if (d.reason.find("in a burst: standby woken") != std::string::npos) break;
    active = d.desired;
  }
  EXPECT_LE(t - 1500, 10) << d.reason;
  EXPECT_LT(active, burst_fleet) << "the windows alone had already asked for the whole fleet";
  EXPECT_GE(d.desired, burst_fleet) << d.reason;
}

}  // namespace
}  // namespace tidegate::scaler
