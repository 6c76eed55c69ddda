#include <gtest/gtest.h>

#include "synthetic.h"
#include "tidegate/replay/baselines.h"
#include "tidegate/replay/config.h"
#include "tidegate/replay/replay.h"
#include "tidegate/replay/tidegate_policy.h"
#include "tidegate/common/log.h"

namespace tidegate::replay {
namespace {

using testing::synthetic_trace;

ReplayOptions small_options() {
  ReplayOptions o = default_config().options;
  o.profile.cold_start_s = 30;
  o.replicas_min = 1;
  o.replicas_max = 16;
  o.keep_requests = true;
  o.warmup_s = 0;
  return o;
}

TEST(ReplayLoop, EveryRequestCompletesAndTtftRespectsPrefill) {
  const auto trace = synthetic_trace(600, 6, 1000, 100);
  auto o = small_options();
  TidegatePolicyConfig tc = default_config().tidegate;
  tc.policy.min_replicas = o.replicas_min;
  tc.policy.max_replicas = o.replicas_max;
  TidegatePolicy policy(tc, "tidegate");
  const auto r = run_replay(trace, policy, o);
  EXPECT_EQ(r.summary.requests, trace.requests.size());
  EXPECT_EQ(r.summary.completed, trace.requests.size());  // conservation: nothing lost or stuck
  EXPECT_EQ(r.summary.rejected, 0u);
  ASSERT_EQ(r.requests.size(), trace.requests.size());
  for (std::size_t i = 0; i < trace.requests.size(); ++i) {
    const auto& q = r.requests[i];
    const double prefill = static_cast<double>(trace.requests[i].prompt_tokens) / o.profile.timing.prefill_tokens_per_s;
    ASSERT_GE(q.queue_wait_s, 0) << i;
    ASSERT_GE(q.ttft_s, q.queue_wait_s + prefill - 1e-9) << i;  // a token needs its prompt prefilled
    ASSERT_GE(q.e2e_s, q.ttft_s) << i;
  }
  // Arrivals in the timeline add up to the trace.
  std::size_t arrivals = 0;
  for (const auto& row : r.timeline) arrivals += row.arrivals;
  EXPECT_EQ(arrivals, trace.requests.size());
  EXPECT_GE(r.summary.max_replicas, 1);
  EXPECT_NEAR(r.summary.gpu_hours * o.profile.usd_per_gpu_hour, r.summary.cost_usd, 1e-9);
  double by_state = 0;
  for (double h : r.summary.gpu_hours_by_state) by_state += h;
  EXPECT_NEAR(by_state, r.summary.gpu_hours, 1e-9);
}

TEST(ReplayLoop, HugeStaticFleetMeetsTheSloAndBillsExactly) {
  const auto trace = synthetic_trace(400, 5, 800, 80);
  auto o = small_options();
  o.replicas_max = 40;
  o.initial_active = 40;
  StaticPolicy policy(40);
  const auto r = run_replay(trace, policy, o);
  EXPECT_GE(r.summary.ttft_slo_attainment, 0.999);
  EXPECT_EQ(r.summary.completed, trace.requests.size());
  EXPECT_EQ(r.summary.scale_events, 0u);
  EXPECT_EQ(r.summary.max_replicas, 40);
  // Forty replicas, all active, for the whole run.
  EXPECT_NEAR(r.summary.gpu_hours, 40 * r.summary.duration_s / 3600, 1e-9);
  EXPECT_NEAR(r.summary.gpu_hours_by_state[kActive], r.summary.gpu_hours, 1e-9);
  EXPECT_NEAR(r.summary.mean_replicas, 40, 1e-9);
}

TEST(ReplayLoop, OverloadedSingleReplicaMissesTheSlo) {
  const auto trace = synthetic_trace(400, 20, 2000, 100);
  auto o = small_options();
  o.replicas_max = 1;
  StaticPolicy policy(1);
  const auto r = run_replay(trace, policy, o);
  EXPECT_EQ(r.summary.completed, trace.requests.size());
  EXPECT_LT(r.summary.ttft_slo_attainment, 0.5);
  EXPECT_GT(r.summary.queue_wait_p99_s, 1.0);
}

// Asks for `n` active replicas from t >= `at`, with a warm pool of `warm`.
class StepPolicy final : public ScalingPolicy {
 public:
  StepPolicy(int n, double at, int warm) : n_(n), at_(at), warm_(warm) {}
  std::string name() const override { return "step"; }
  double decide_period_s() const override { return 1; }
  ScaleTarget decide(const ClusterObservation& o) override { return {o.t >= at_ ? n_ : 1, warm_}; }

 private:
  int n_;
  double at_;
  int warm_;
};

TEST(ReplayLoop, ColdStartsAndWarmPromotionsTakeTheirTime) {
  const auto trace = synthetic_trace(300, 2, 500, 50);  // ~150 s
  auto o = small_options();
  o.profile.cold_start_s = 40;
  o.profile.warm_promotion_s = 5;
  o.timeline_period_s = 1;
  {
    StepPolicy cold(2, 10, 0);
    const auto r = run_replay(trace, cold, o);
    // One cold start of 40 s, billed as starting.
    EXPECT_NEAR(r.summary.gpu_hours_by_state[kStarting] * 3600, 40, 1.0);
    for (const auto& row : r.timeline) {
      if (row.t >= 12 && row.t < 48) {
        EXPECT_EQ(row.active, 1) << row.t;
      }
      if (row.t >= 52 && row.t < 140) {
        EXPECT_EQ(row.active, 2) << row.t;
      }
    }
  }
  {
    StepPolicy warm(2, 60, 1);  // the warm replica is loaded by ~41 s, promoted at 60 s
    const auto r = run_replay(trace, warm, o);
    bool saw_warm = false;
    for (const auto& row : r.timeline) {
      if (row.t >= 45 && row.t < 59) saw_warm |= row.warm == 1;
      if (row.t >= 67 && row.t < 100) {
        EXPECT_EQ(row.active, 2) << row.t;  // 5 s promotion, not 40
      }
    }
    EXPECT_TRUE(saw_warm);
    EXPECT_GT(r.summary.gpu_hours_by_state[kWarm], 0);
  }
}

TEST(ReplayLoop, ColdStartsTheTraceEndsBeforeAreReportedApart) {
  const auto trace = synthetic_trace(300, 2, 500, 50);  // ~150 s
  auto o = small_options();
  o.profile.cold_start_s = 40;
  {
    StepPolicy early(2, 10, 0);  // ready at ~50 s, long before the end
    const auto r = run_replay(trace, early, o);
    EXPECT_NEAR(r.summary.gpu_hours_by_state[kStarting] * 3600, 40, 1.0);
    EXPECT_EQ(r.summary.gpu_hours_unready_at_end, 0);
  }
  {
    const double last = trace.requests.back().arrival_s;
    StepPolicy late(2, last - 10, 0);  // 40 s to load, the trace ends within about 10
    const auto r = run_replay(trace, late, o);
    ASSERT_LT(r.summary.duration_s, last - 10 + 40) << "the test needs the replay to end mid cold start";
    EXPECT_GT(r.summary.gpu_hours_unready_at_end, 0);
    // Billed in full (it is part of the starting hours), from its start to the end.
    EXPECT_NEAR(r.summary.gpu_hours_unready_at_end, r.summary.gpu_hours_by_state[kStarting], 1e-12);
    EXPECT_NEAR(r.summary.gpu_hours_unready_at_end * 3600, r.summary.duration_s - (last - 10), 1.5);
    EXPECT_NEAR(r.summary.gpu_hours, r.summary.gpu_hours_by_state[kActive] + r.summary.gpu_hours_by_state[kStarting], 1e-9);
  }
}

TEST(ReplayLoop, LiveLifecycleControllerKeepsTheWarmPoolAndLosesNothing) {
  log::set_min_level(log::Level::kWarn);  // the controller logs every transition
  const auto trace = synthetic_trace(900, 6, 1000, 100);
  auto o = small_options();
  o.initial_active = 3;
  for (const bool lifecycle : {true, false}) {
    TidegatePolicyConfig tc = default_config().tidegate;
    tc.policy.min_replicas = o.replicas_min;
    tc.policy.max_replicas = o.replicas_max;
    tc.warm_pool_size = 1;
    tc.lifecycle_controller = lifecycle;
    TidegatePolicy policy(tc, "tidegate");
    ASSERT_EQ(policy.drives_lifecycle(), lifecycle);
    const auto r = run_replay(trace, policy, o);
    EXPECT_EQ(r.summary.completed, trace.requests.size()) << lifecycle;
    EXPECT_GT(r.summary.gpu_hours_by_state[kWarm], 0) << lifecycle;  // the pool was kept
    EXPECT_GE(r.summary.ttft_slo_attainment, 0.9) << lifecycle;
    int warm_rows = 0;
    for (const auto& row : r.timeline) warm_rows += row.warm >= 1;
    EXPECT_GT(warm_rows, static_cast<int>(r.timeline.size()) / 2) << lifecycle;
  }
}

TEST(ReplayLoop, RejectsAbsurdOptions) {
  auto o = small_options();
  o.replicas_min = 0;
  EXPECT_THROW(validate(o), std::invalid_argument);
  o = small_options();
  o.replicas_min = 5;
  o.replicas_max = 4;
  EXPECT_THROW(validate(o), std::invalid_argument);
  o = small_options();
  o.slo.ttft_s = -1;
  EXPECT_THROW(validate(o), std::invalid_argument);
  o = small_options();
  o.profile.usd_per_gpu_hour = 1e9;
  EXPECT_THROW(validate(o), std::invalid_argument);
}

}  // namespace
}  // namespace tidegate::replay
