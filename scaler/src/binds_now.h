#pragma once
// What binds now, regardless of the queueing bound: the KV the requests in the fleet hold, the
// in-flight slots they fill, and a prefill backlog drained before more replicas could arrive.
// A state of the present, not a forecast: the work model never adds it to a swing's load.
#include <algorithm>

#include "demand.h"
#include "tidegate/scaler/policy.h"

namespace tidegate::scaler::detail {

// The load the backlog is drained on top of (in replicas of prefill load), and what a request
// costs (seconds of one replica's prefill, prompt tokens, the share of them cached).
struct LoadForBinds {
  double now = 0;                 // the window's load (no SLO headroom)
  double planned = 0;             // ... times the SLO loop's headroom
  double planned_less_noise = 0;  // ... less its noise: what a fleet measured to meet the SLO serves
  double service_s = 0;           // mean prefill time of a request
  double prompt_tokens = 0;       // mean prompt tokens of a request
  double hit_ratio = 0;           // prefix-cache hit ratio
  double tau_s = 0;               // the TTFT budget after the first step
  double drain_s = 0;             // a backlog is drained within this (replicas asked now arrive then)
};

struct BindsNow {
  int kv = 0, slots = 0, backlog = 0;  // each bound's replicas (0: its signal is not known)
  int backlog_less_noise = 0;          // the backlog drained on top of the load less its noise
  int all() const { return std::max({kv, slots, backlog}); }
  // What a fleet measured to meet the SLO still starts for: KV and slots as they are, and a
  // backlog only on top of the load it is known to serve (work_model.cc, the learning rule).
  int all_less_noise() const { return std::max({kv, slots, backlog_less_noise}); }
  // KV and slots alone: what the requests in the fleet hold, and the larger's name.
  int occupied() const { return std::max(kv, slots); }
  const char* occupied_by() const { return slots > kv ? "in-flight slots" : kv > 0 ? "KV" : ""; }
};

BindsNow binds_now(const PolicyConfig& config, const Signals& signals, const Window& long_window,
                   const LoadForBinds& load);

}  // namespace tidegate::scaler::detail
