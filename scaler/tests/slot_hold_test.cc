// A request holds its slot while it decodes, one token a step, and a replica's steps slow as it
// carries more prefill. A climbing load therefore fills the slots faster than it grows: the
// plan counts the slots the load it may reach will fill with the hold scaled by the step rate
// that load brings, not the hold measured at the lighter prefill of now.
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

// A wave on an operator's 4 replicas: 16 req/s, 6 more or less over a 10-minute period. The
// engine's requests in flight follow its step rate; every first token in time.
double wave_rate(int t) { return 16 + 6 * std::sin(2 * 3.14159265358979 * t / 600); }

std::vector<Decision> wave(int until, bool decode_timings) {
  const auto cfg = config(decode_timings);
  const auto engine = config(true).capacity;
  PolicyState st;
  std::vector<Decision> out;
  for (int t = 0; t <= until; ++t) {
    const double rate = wave_rate(t);
    auto in = tick(t, rate, kTokens, 4);
    const double rho = rate * kTokens / engine.prefill_tokens_per_s / 4;
    in.signals.in_flight = rate * engine_hold_s(engine, rho);
    out.push_back(decide(cfg, st, in));
  }
  return out;
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

TEST(SlotHold, ThePeakItselfAsksNoMoreThanItsLoad) {
  // At the crest (t = 1950, 22 req/s) nothing climbs further: the plan is what the load needs
  // now, with or without the step rates.
  const auto scaled = wave(1950, true).back(), unscaled = wave(1950, false).back();
  ASSERT_TRUE(scaled.work && unscaled.work);
  EXPECT_EQ(scaled.work->for_plan, unscaled.work->for_plan) << scaled.reason;
}

}  // namespace
}  // namespace tidegate::scaler
