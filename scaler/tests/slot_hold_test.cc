// A request holds its slot while it decodes, one token a step, and a replica's steps slow as it
// carries more prefill. A climbing load therefore fills the slots faster than it grows: under
// smooth demand the plan counts the slots the load its swing margin looks ahead to will fill,
// with the hold scaled by the step rate that load brings, not the hold measured at the lighter
// prefill of now. Under bursty demand a swing is not counted in slots.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tidegate/scaler/policy.h"
#include "work_model_inputs.h"

namespace tidegate::scaler {
namespace {

using work_inputs::tick;
using work_inputs::work_config;

constexpr double kTokens = 1000;    // prompt tokens a request: 0.1 s of prefill
constexpr double kGenerated = 200;  // tokens each request generates

PolicyConfig config(bool decode_timings) {
  auto cfg = work_config();
  cfg.burst_memory_s = 900;
  cfg.slo.window_s = 600;
  cfg.capacity.step_s = 0.215;
  cfg.capacity.max_in_flight = 32;
  if (!decode_timings) cfg.capacity.decode_step_s = cfg.capacity.decode_per_seq_s = cfg.capacity.decode_per_kv_token_s = 0;
  return cfg;
}

// What an engine with the default decode timings holds a slot for when its replicas spend
// `rho` of their time prefilling: the steps with a prefill chunk take the whole budget's time.
double engine_hold_s(const ReplicaCapacity& cap, double rho) {
  const double per_seq = cap.decode_per_seq_s + kTokens * cap.decode_per_kv_token_s;
  const double decode = cap.decode_step_s + 32 * per_seq, chunk = cap.step_s + 32 * per_seq;
  rho = std::clamp(rho, 0.0, 1.0);
  return 0.2 + kGenerated / ((1 - rho) / decode + rho / chunk);
}

// Demand on an operator's `fleet` replicas at `rate_at(t)` req/s. The engine's requests in flight
// follow its step rate; every first token in time.

template <class Rate>
std::vector<Decision> run(int until, bool decode_timings, int fleet, Rate rate_at) {
  const auto cfg = config(decode_timings);
  const auto engine = config(true).capacity;
  PolicyState st;
  std::vector<Decision> out;
  for (int t = 0; t <= until; ++t) {
    const double rate = rate_at(t);
    auto in = tick(t, rate, kTokens, fleet);
    const double rho = rate * kTokens / engine.prefill_tokens_per_s / fleet;
    in.signals.in_flight = std::min(rate * engine_hold_s(engine, rho), fleet * 32.0);  // the gateway's slots
    out.push_back(decide(cfg, st, in));
  }
  return out;
}

// A wave on 4 replicas: 16 req/s, 6 more or less over a 10-minute period.
double wave_rate(int t) { return 16 + 6 * std::sin(2 * 3.14159265358979 * t / 600); }
std::vector<Decision> wave(int until, bool decode_timings) { return run(until, decode_timings, 4, wave_rate); }

TEST(SlotHold, OnTheRisingSideTheMarginCountsTheSlotsOfTheCrest) {
  // On the wave's rising side (t = 1830, 17.9 req/s) the load may reach, within a cold start,
  // the highest load seen less its noise (the remembered peak, 1.93 replicas of prefill: 19.3
  // req/s). On 3 replicas the engine would hold more requests than their planned share of
  // slots; on 4 it would not.
  const auto engine = config(true).capacity;
  auto in_flight = [&](double rate, int c) { return rate * engine_hold_s(engine, rate * kTokens / engine.prefill_tokens_per_s / c); };
  ASSERT_GT(in_flight(19.3, 3), 3 * 32 * 0.9);
  ASSERT_LT(in_flight(19.3, 4), 4 * 32 * 0.9);
  // The plan asks for the fourth now, a cold start before the crest; with the hold measured
  // now, unscaled, it asks for 3 and starts the fourth only when the slots in use show it.
  const auto scaled = wave(1830, true).back(), unscaled = wave(1830, false).back();
  ASSERT_TRUE(scaled.work && unscaled.work);
  EXPECT_EQ(scaled.desired, 4) << scaled.reason;
  EXPECT_NE(scaled.reason.find("-> 4 (the in-flight slots, each held longer"), std::string::npos) << scaled.reason;
  EXPECT_EQ(unscaled.desired, 3) << unscaled.reason;
}

TEST(SlotHold, TheSwingMarginCountsTheSlotsAtTheStepRateTheSwingBrings) {
  // Near the trough (t = 1620, 11 req/s) the load may swing within a cold start by as much as
  // the wave's steepest minute did (3.8 req/s). On 2 replicas that is 75% of each one's time
  // prefilling: the engine would hold each slot twice as long as at the trough, more requests
  // than 2 replicas' planned share of slots.
  const auto engine = config(true).capacity;
  const double swung = wave_rate(1620) + 6 * 2 * 3.14159265358979 / 10;
  ASSERT_GT(swung * engine_hold_s(engine, swung * kTokens / engine.prefill_tokens_per_s / 2), 2 * 32 * 0.9);
  // The plan (before the stabilisation window) holds 3 for it; with the hold measured now,
  // unscaled, it releases to 2.
  const auto scaled = wave(1620, true).back(), unscaled = wave(1620, false).back();
  ASSERT_TRUE(scaled.work && unscaled.work);
  EXPECT_EQ(scaled.work->for_plan, 3) << scaled.reason;
  EXPECT_NE(scaled.reason.find("-> 3 (the in-flight slots, each held longer"), std::string::npos) << scaled.reason;
  EXPECT_EQ(unscaled.work->for_plan, 2) << unscaled.reason;
}

TEST(SlotHold, TheSmoothDemandRuleKeepsTheSlotsASwingFills) {
  // 20 req/s for two minutes, then 35, and so on, on 5 replicas: a swing smaller than the usual
  // level (not bursty), every first token in time, so the smooth-demand rule vouches for the 5.
  // At 35 req/s the 5 prefill 70% of their time and would hold 280 requests in their 160 slots.
  // In a low phase the plan asks for the sixth the swing's slots need, and the rule, which
  // refuses the margin for prefill, keeps it: a request that finds every slot taken waits a
  // whole generation for one.
  const auto d = run(1070, true, 5, [](int t) { return t % 240 < 120 ? 20.0 : 35.0; }).back();
  EXPECT_EQ(d.desired, 6) << d.reason;
  EXPECT_NE(d.reason.find("-> 6 (the in-flight slots"), std::string::npos) << d.reason;
  EXPECT_EQ(d.reason.find("not starting"), std::string::npos) << d.reason;
}

TEST(SlotHold, ThePeakItselfAsksNoMoreThanItsLoad) {
  // At the crest (t = 1950, 22 req/s) nothing climbs further: the plan is what the load needs
  // now, with or without the step rates.
  const auto scaled = wave(1950, true).back(), unscaled = wave(1950, false).back();
  ASSERT_TRUE(scaled.work && unscaled.work);
  EXPECT_EQ(scaled.work->for_plan, unscaled.work->for_plan) << scaled.reason;
}

TEST(SlotHold, ABurstsSwingIsNotCountedInSlots) {
  // Bursts of 30 req/s for a minute every 5 minutes, 4 req/s between them, on 10 replicas: each
  // burst climbs far past noise, but under bursty demand the plan's margin is the prefill a
  // swing brings, and the slots the bursts filled are remembered as measured. A burst's swing
  // scaled to slots at the step rate it brings asks for more than any burst used: counting it
  // under bursty demand changes the plan at all 41 of these ticks. The plan is the same with
  // and without the step rates, in the bursts and between them.
  auto bursts = [](int t) { return t % 300 < 60 ? 30.0 : 4.0; };
  for (int t = 900; t <= 1500; t += 15) {
    const auto scaled = run(t, true, 10, bursts).back(), unscaled = run(t, false, 10, bursts).back();
    ASSERT_TRUE(scaled.work && unscaled.work);
    EXPECT_EQ(scaled.work->for_plan, unscaled.work->for_plan) << "t=" << t << ": " << scaled.reason;
  }
}

}  // namespace
}  // namespace tidegate::scaler
