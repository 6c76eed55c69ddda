#pragma once
// Inputs the work model's tests share: a small fleet's config and one second of traffic.
#include <optional>

#include "tidegate/scaler/policy.h"

namespace tidegate::scaler::work_inputs {

inline PolicyConfig work_config() {
  PolicyConfig c;
  c.min_replicas = 1;
  c.max_replicas = 100;
  c.capacity.prefill_tokens_per_s = 10000;
  c.capacity.attention_context_tokens = 0;
  c.capacity.overhead = 0;
  c.capacity.step_s = 0.2;
  c.capacity.kv_tokens.reset();
  c.slo.ttft_s = 1.0;
  c.slo.attainment = 0.99;
  c.cold_start_s = 60;
  c.scale_down_max_rate = 100;
  c.hold_starting_fleet = false;  // no learning hold unless a test wants one
  return c;
}

// work_config() with a burst memory of 900 s and an SLO window of 600 s: a test's span of an hour
// or so sees the policy forget bursts and misses.
inline PolicyConfig short_memory_config() {
  auto c = work_config();
  c.burst_memory_s = 900;
  c.slo.window_s = 600;
  return c;
}

// One second of traffic: `rate` requests of `tokens` prompt tokens each (no size histogram:
// exponential sizes are assumed).
inline PolicyInput tick(double t, double rate, double tokens, int active, std::optional<double> met = std::nullopt) {
  PolicyInput in;
  in.t = t;
  in.active = active;
  in.signals.arrivals = rate;
  in.signals.arrival_prompt_tokens = rate * tokens;
  in.signals.ttft_total = rate;
  in.signals.ttft_met = met ? *met * rate : rate;
  return in;
}

// Bursts of 80 req/s (8 replicas of prefill load at 1000 prompt tokens) for 60 s every 300 s,
// 2 req/s between them.
inline bool in_burst(int t) { return t % 300 < 60; }
inline double burst_rate(int t) { return in_burst(t) ? 80 : 2; }

// Bursts as frequent as a step below a served fleet needs (burst_hold.cc): 80 req/s for 30 s
// every 200 s, 2 req/s between them, with a burst memory of 1200 s (six bursts) and an SLO window
// of an hour. A step risks a seventh of a burst's 2,400 first tokens, which the window's 1% budget
// covers once it holds about fourteen bursts. (A burst is recorded a demand window and a tail
// after it ends, before the next begins.)
inline bool in_frequent_burst(int t) { return t % 200 < 30; }
inline double frequent_burst_rate(int t) { return in_frequent_burst(t) ? 80 : 2; }
inline PolicyConfig frequent_bursts_config() {
  auto c = short_memory_config();
  c.burst_memory_s = 1200;
  c.slo.window_s = 3600;
  return c;
}

}  // namespace tidegate::scaler::work_inputs
