// Hand-computed cases for the pure policy. Target: 10 concurrent requests per replica
// unless a test says otherwise.
#include <gtest/gtest.h>

#include "tidegate/scaler/policy.h"

namespace tidegate::scaler {
namespace {

PolicyConfig base() {
  PolicyConfig c;
  c.min_replicas = 1;
  c.max_replicas = 20;
  c.work_model = false;  // target tracking alone (work_model_test.cc has the work model)
  c.targets = {};
  c.targets.concurrency_per_replica = 10;
  c.scale_down_stabilization_s = 300;
  c.scale_down_max_rate = 100;  // isolate the rule under test
  return c;
}

PolicyInput at(double t, std::optional<double> concurrency, int active, int starting = 0) {
  PolicyInput in;
  in.t = t;
  in.signals.concurrency = concurrency;
  in.active = active;
  in.starting = starting;
  return in;
}

TEST(Policy, TargetTrackingRoundsUp) {
  PolicyState st;
  const auto d = decide(base(), st, at(0, 50, 4));  // 50/10 = 5; 5 < 2*4 so no panic
  EXPECT_EQ(d.desired, 5);
  EXPECT_EQ(d.direction, Direction::kUp);
  EXPECT_EQ(d.reason_code, "target_tracking");
  EXPECT_FALSE(d.panic);
  ASSERT_EQ(d.signals.size(), 1u);
  EXPECT_EQ(d.signals[0].signal, "concurrency");
  EXPECT_EQ(d.signals[0].stable_desired, 5);
}

TEST(Policy, ToleranceBand) {
  for (auto [value, want] : {std::pair{42.0, 4}, {44.0, 4}, {36.0, 4}, {45.0, 5}, {35.0, 4}}) {
    PolicyState st;
    auto cfg = base();
    cfg.scale_down_stabilization_s = 0;
    const auto d = decide(cfg, st, at(0, value, 4));
    EXPECT_EQ(d.desired, want) << value;
  }
  PolicyState st;
  EXPECT_EQ(decide(base(), st, at(0, 42, 4)).reason_code, "within_tolerance");
  PolicyState st2;
  auto cfg = base();
  cfg.scale_down_stabilization_s = 0;
  EXPECT_EQ(decide(cfg, st2, at(0, 34, 4)).desired, 4);  // ceil(3.4) = 4: outside the band, same count
}

TEST(Policy, StableWindowAveragesAndPanicWindowReacts) {
  PolicyState st;
  const auto cfg = base();  // stable 60 s, panic 6 s
  for (int t = 0; t <= 53; ++t) ASSERT_EQ(decide(cfg, st, at(t, 40, 4)).desired, 4);
  decide(cfg, st, at(54, 100, 4));
  // t=55: stable mean (54*40 + 2*100)/56 = 42.1 (tolerance); panic mean over (49,55] = 60 -> 6 < 8.
  auto d = decide(cfg, st, at(55, 100, 4));
  EXPECT_EQ(d.desired, 4);
  EXPECT_FALSE(d.panic);
  for (int t = 56; t <= 58; ++t) d = decide(cfg, st, at(t, 100, 4));
  // t=58: panic mean over (52,58] = (40 + 5*100)/6 = 90 -> 9 >= 2*4: scale at once.
  EXPECT_TRUE(d.panic);
  EXPECT_EQ(d.desired, 9);
  EXPECT_EQ(d.reason_code, "panic");
  EXPECT_EQ(d.reason.rfind("panic: concurrency demand 2.", 0), 0u) << d.reason;
  d = decide(cfg, st, at(59, 100, 4));
  EXPECT_EQ(d.desired, 10);  // (53,59] all 100
}

TEST(Policy, PanicNeverScalesDownUntilAStableWindowPasses) {
  PolicyState st;
  auto cfg = base();
  cfg.scale_down_stabilization_s = 0;
  auto d = decide(cfg, st, at(0, 100, 4));  // 10 >= 8: panic at t=0
  ASSERT_TRUE(d.panic);
  ASSERT_EQ(d.desired, 10);
  for (int t = 1; t < 60; ++t) {
    d = decide(cfg, st, at(t, 0, 10));
    ASSERT_TRUE(d.panic) << t;
    ASSERT_EQ(d.desired, 10) << t;
  }
  d = decide(cfg, st, at(60, 0, 10));  // 60 s after the last panic signal
  EXPECT_FALSE(d.panic);
  EXPECT_EQ(d.desired, 1);  // stable window (0,60] is all zeros -> 0, min 1
  EXPECT_EQ(d.direction, Direction::kDown);
}

TEST(Policy, ScaleDownStabilisationHoldsTheHighestRecentRecommendation) {
  PolicyState st;
  auto cfg = base();
  cfg.stable_window_s = cfg.panic_window_s = 1;  // only the stabilisation is under test
  EXPECT_EQ(decide(cfg, st, at(0, 50, 5)).desired, 5);
  auto d = decide(cfg, st, at(10, 20, 5));
  EXPECT_EQ(d.desired, 5);
  EXPECT_EQ(d.reason_code, "stabilised");
  EXPECT_NE(d.reason.find("stabilised: holding max recommendation 5 of last 300s"), std::string::npos) << d.reason;
  EXPECT_EQ(decide(cfg, st, at(299, 20, 5)).desired, 5);
  d = decide(cfg, st, at(301, 20, 5));  // the t=0 recommendation left the window
  EXPECT_EQ(d.desired, 2);
  EXPECT_EQ(d.direction, Direction::kDown);
}

// Under leader election a follower sees only its own gateway's share of the traffic: its own
// recommendations say less than the fleet the leader runs. Recorded with that fleet, its window
// keeps the leader's capacity for a whole window after it takes over, instead of releasing it on
// its first tick (which drained a replica other gateways were streaming from).
TEST(Policy, AFollowerTakingOverKeepsTheLeadersFleetForTheWindow) {
  auto cfg = base();
  cfg.stable_window_s = cfg.panic_window_s = 1;
  PolicyState follower, alone;
  for (double t = 0; t < 60; t += 1) {
    auto in = at(t, 8, 3);  // its own 8 requests want 1 replica; the leader runs 3
    in.decided_elsewhere = true;
    EXPECT_EQ(decide(cfg, follower, in).direction, Direction::kHold) << t;  // what it shows: no release
    decide(cfg, alone, at(t, 8, 3));
  }
  // Now the leader: the same traffic, nothing decided elsewhere.
  auto d = decide(cfg, follower, at(60, 8, 3));
  EXPECT_EQ(d.desired, 3);
  EXPECT_EQ(d.reason_code, "stabilised");
  EXPECT_EQ(decide(cfg, follower, at(359, 8, 3)).desired, 3);  // the last follower tick (t=59) is in the window
  d = decide(cfg, follower, at(361, 8, 3));
  EXPECT_EQ(d.desired, 1);
  EXPECT_EQ(d.direction, Direction::kDown);
  // Without the rule it would have released two replicas at once.
  EXPECT_EQ(decide(cfg, alone, at(60, 8, 3)).desired, 1);
}

TEST(Policy, StepRatesLimitBothDirections) {
  auto cfg = base();
  cfg.scale_up_max_step = 3;
  PolicyState up;
  auto d = decide(cfg, up, at(0, 200, 2));  // wants 20, at most 2 + 3
  EXPECT_EQ(d.desired, 5);
  EXPECT_EQ(d.reason_code, "rate_limited");

  cfg = base();
  cfg.scale_up_max_rate = 2;
  PolicyState up2;
  EXPECT_EQ(decide(cfg, up2, at(0, 200, 3)).desired, 6);  // 3 * 2

  cfg = base();
  cfg.scale_down_stabilization_s = 0;
  cfg.scale_down_max_rate = 2;
  PolicyState down;
  d = decide(cfg, down, at(0, 10, 10));  // wants 1, at most halve
  EXPECT_EQ(d.desired, 5);
  EXPECT_EQ(d.reason_code, "rate_limited");
  cfg.scale_down_max_step = 2;
  PolicyState down2;
  EXPECT_EQ(decide(cfg, down2, at(0, 10, 10)).desired, 8);
}

TEST(Policy, MinAndMaxBound) {
  auto cfg = base();
  cfg.scale_down_stabilization_s = 0;
  PolicyState a;
  auto d = decide(cfg, a, at(0, 0, 3));
  EXPECT_EQ(d.desired, 1);
  EXPECT_EQ(d.reason_code, "min_replicas");
  PolicyState b;
  d = decide(cfg, b, at(0, 1000, 3));
  EXPECT_EQ(d.desired, 20);
  EXPECT_EQ(d.reason_code, "max_replicas");
}

TEST(Policy, StartingReplicasCountAsCapacity) {
  PolicyState st;
  const auto cfg = base();
  auto d = decide(cfg, st, at(0, 40, 1));  // a burst: 4 wanted, 1 active
  EXPECT_EQ(d.desired, 4);
  EXPECT_EQ(d.direction, Direction::kUp);
  // The controller started 3; the queue grows while they load. No second round.
  for (int t = 1; t <= 5; ++t) {
    d = decide(cfg, st, at(t, 40, 1, 3));
    EXPECT_EQ(d.desired, 4) << t;
    EXPECT_EQ(d.direction, Direction::kHold) << t;
    EXPECT_EQ(d.reason_code, "starting_covers") << t;
  }
}

TEST(Policy, ScaleToZeroAndBack) {
  auto cfg = base();
  cfg.min_replicas = 0;
  cfg.scale_to_zero = true;
  cfg.stable_window_s = 10;
  cfg.panic_window_s = 2;
  cfg.scale_down_stabilization_s = 10;
  cfg.scale_down_max_rate = 2;
  PolicyState st;
  EXPECT_EQ(decide(cfg, st, at(0, 5, 1)).desired, 1);
  for (int t = 1; t < 20; ++t) ASSERT_EQ(decide(cfg, st, at(t, 0, 1)).desired, 1) << t;
  auto d = decide(cfg, st, at(20, 0, 1));  // zero demand for a stable window, then stabilised
  EXPECT_EQ(d.desired, 0);
  EXPECT_EQ(d.direction, Direction::kDown);
  d = decide(cfg, st, at(21, 3, 0));  // a request arrives at zero replicas
  EXPECT_EQ(d.desired, 1);
  EXPECT_EQ(d.direction, Direction::kUp);
  EXPECT_EQ(d.reason_code, "from_zero");
  d = decide(cfg, st, at(22, 3, 0, 1));
  EXPECT_EQ(d.direction, Direction::kHold);  // the starting one covers it

  cfg.scale_up_max_rate = 3;  // from zero, the rate applies to one replica: up to 3 at once
  PolicyState burst;
  d = decide(cfg, burst, at(0, 200, 0));
  EXPECT_EQ(d.desired, 3);
  EXPECT_EQ(d.reason_code, "rate_limited");
}

TEST(Policy, ScheduledMinimums) {
  auto cfg = base();
  cfg.scale_down_stabilization_s = 0;
  cfg.schedule.push_back({0b0111110, 8 * 3600, 18 * 3600, 5});  // weekdays 08:00-18:00
  cfg.schedule.push_back({0x7f, 22 * 3600, 2 * 3600, 3});       // every night, wraps midnight
  auto run = [&](double tod, int weekday) {
    PolicyState st;
    auto in = at(0, 0, 1);
    in.time_of_day_s = tod;
    in.weekday = weekday;
    return decide(cfg, st, in);
  };
  auto d = run(9 * 3600, 1);
  EXPECT_EQ(d.desired, 5);
  EXPECT_EQ(d.reason_code, "scheduled_min");
  EXPECT_EQ(run(9 * 3600, 0).desired, 1);   // Sunday
  EXPECT_EQ(run(18 * 3600, 3).desired, 1);  // end is exclusive
  EXPECT_EQ(run(1 * 3600, 0).desired, 3);
  EXPECT_EQ(run(23 * 3600, 6).desired, 3);
}

TEST(Policy, LargestSignalWinsAndMissingSignalsAreSkipped) {
  auto cfg = base();
  cfg.targets.kv_usage = 0.5;
  PolicyState st;
  PolicyInput in = at(0, 30, 4);  // concurrency -> 3
  in.signals.kv_usage = 0.75;     // 4 * 0.75 / 0.5 -> 6
  auto d = decide(cfg, st, in);
  EXPECT_EQ(d.desired, 6);
  EXPECT_EQ(d.signals.size(), 2u);

  PolicyState st2;
  in = at(0, std::nullopt, 4);
  in.signals.kv_usage = 0.6;  // concurrency missing: kv alone, ceil(4.8) = 5
  d = decide(cfg, st2, in);
  EXPECT_EQ(d.desired, 5);
  ASSERT_EQ(d.signals.size(), 1u);
  EXPECT_EQ(d.signals[0].signal, "kv_usage");

  PolicyState st3;
  d = decide(cfg, st3, at(0, std::nullopt, 4));
  EXPECT_EQ(d.desired, 4);
  EXPECT_EQ(d.reason_code, "no_signals");
  EXPECT_EQ(d.direction, Direction::kHold);
}

TEST(Policy, ValidateRejectsNonsense) {
  auto cfg = base();
  cfg.min_replicas = 5;
  cfg.max_replicas = 2;
  EXPECT_THROW(validate(cfg), std::invalid_argument);
  cfg = base();
  cfg.min_replicas = 0;
  EXPECT_THROW(validate(cfg), std::invalid_argument);
  cfg.scale_to_zero = true;
  EXPECT_NO_THROW(validate(cfg));
  cfg = base();
  cfg.panic_window_s = 120;
  EXPECT_THROW(validate(cfg), std::invalid_argument);
  cfg = base();
  cfg.targets.concurrency_per_replica.reset();
  EXPECT_THROW(validate(cfg), std::invalid_argument);
}

}  // namespace
}  // namespace tidegate::scaler
