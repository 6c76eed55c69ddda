// A backlog (prompt tokens waiting) asks for the replicas that drain it within a cold start on
// top of the load. Where the held fleet is measured to meet the SLO (while the policy learns,
// and under smooth demand once the measurement vouches for the fleet), that load is taken less
// its noise: a queue at the fleet's edge does not start replicas the measurement says it does
// not need, and a backlog the fleet cannot drain even so still starts what it asks for.
#include <gtest/gtest.h>

#include "tidegate/scaler/policy.h"
#include "work_model_inputs.h"

namespace tidegate::scaler {
namespace {

using work_inputs::tick;

// 50 req/s of 1000 tokens (5 replicas of prefill load, 4.61 less three standard errors of the
// minute's estimate) on an operator's fleet of 6, every first token in time; `backlog` prompt
// tokens waiting at the last tick. `learning`: the starting fleet is held while the policy
// learns (decision at 120 s); otherwise smooth demand after 700 s, the fleet held by nothing
// but the measurement.
Decision with_backlog(bool learning, double backlog) {
  auto cfg = learning ? work_inputs::work_config() : work_inputs::short_memory_config();
  if (learning) {
    cfg.hold_starting_fleet = true;
    cfg.learn_s = 600;
    cfg.burst_memory_s = 1800;
  }
  const int end = learning ? 120 : 700;
  PolicyState st;
  Decision d;
  for (int t = 0; t < end; ++t) {
    auto in = tick(t, 50, 1000, 6);
    in.signals.prefill_backlog_tokens = t == end - 1 ? backlog : 0;
    d = decide(cfg, st, in);
  }
  return d;
}

TEST(Backlog, AQueueAtTheEdgeOfAFleetMeasuredToMeetTheSloStartsNothingWhileLearning) {
  // 700k tokens: 70 s of one replica's prefill, 1.17 replicas over the 60 s cold start. On top
  // of the load (5) that asks for 7; on top of the load less its noise (4.61), the 6 held.
  const auto d = with_backlog(true, 700e3);
  EXPECT_EQ(d.work->for_demand, 7) << d.reason;
  EXPECT_EQ(d.desired, 6) << d.reason;
  EXPECT_EQ(d.reason_code, "learning");
  EXPECT_NE(d.reason.find("drain the backlog on top of the load less its noise (4.61)"), std::string::npos)
      << d.reason;
}

TEST(Backlog, AQueueAtTheEdgeOfAFleetMeasuredToMeetTheSloStartsNothingUnderSmoothDemand) {
  const auto d = with_backlog(false, 700e3);
  EXPECT_EQ(d.work->for_demand, 7) << d.reason;
  EXPECT_EQ(d.desired, 6) << d.reason;
  EXPECT_EQ(d.reason_code, "slo_met");
}

TEST(Backlog, ABacklogTheFleetCannotDrainStillStartsWhatItAsksFor) {
  // 2M tokens: 3.33 replicas over the cold start, 7.94 on top of the load less its noise.
  for (const bool learning : {true, false}) {
    const auto d = with_backlog(learning, 2e6);
    EXPECT_EQ(d.work->for_demand, 9) << d.reason;  // on top of the load: 8.33
    EXPECT_EQ(d.desired, 8) << "learning " << learning << ": " << d.reason;
  }
  // While learning, the replicas it starts are named as what binds now.
  EXPECT_NE(with_backlog(true, 2e6).reason.find("starting 2 for what binds now"), std::string::npos);
}

TEST(Backlog, WithoutTheMeasurementsWordTheBacklogCountsOnTopOfTheWholeLoad) {
  // No first tokens counted: nothing vouches for the 6, and the 700k tokens start one.
  auto cfg = work_inputs::short_memory_config();
  PolicyState st;
  Decision d;
  for (int t = 0; t < 700; ++t) {
    auto in = tick(t, 50, 1000, 6);
    in.signals.ttft_total.reset(), in.signals.ttft_met.reset();
    in.signals.prefill_backlog_tokens = t == 699 ? 700e3 : 0;
    d = decide(cfg, st, in);
  }
  EXPECT_EQ(d.desired, 7) << d.reason;
}

}  // namespace
}  // namespace tidegate::scaler
