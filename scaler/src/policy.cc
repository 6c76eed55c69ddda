#include "tidegate/scaler/policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "target_tracking.h"
#include "work_model.h"

namespace tidegate::scaler {
namespace {

using detail::fmt;

bool schedule_applies(const ScheduledMinimum& s, const PolicyInput& in) {
  if (!in.time_of_day_s) return false;
  if (in.weekday >= 0 && !(s.days_mask & (1u << in.weekday))) return false;
  const double tod = *in.time_of_day_s;
  return s.from_s <= s.to_s ? (tod >= s.from_s && tod < s.to_s) : (tod >= s.from_s || tod < s.to_s);
}

// The highest value of the window wins; returns it (>= value).
int hold_highest(std::deque<std::pair<double, int>>& window, double t, double length, int value) {
  window.emplace_back(t, value);
  while (!window.empty() && window.front().first < t - length) window.pop_front();
  int held = value;
  for (const auto& r : window) held = std::max(held, r.second);
  return held;
}

}  // namespace

void validate(const PolicyConfig& c) {
  auto fail = [](const std::string& field, const std::string& msg) { throw std::invalid_argument(field + ": " + msg); };
  if (c.min_replicas < 0) fail("min_replicas", "must be >= 0");
  if (c.min_replicas == 0 && !c.scale_to_zero) fail("min_replicas", "0 requires scale_to_zero: true");
  if (c.max_replicas < 1) fail("max_replicas", "must be >= 1");
  if (c.min_replicas > c.max_replicas) fail("min_replicas", "must be <= max_replicas");
  if (!(c.stable_window_s > 0)) fail("stable_window", "must be > 0");
  if (!(c.panic_window_s > 0) || c.panic_window_s > c.stable_window_s)
    fail("panic_window", "must be > 0 and <= stable_window");
  if (!(c.panic_threshold > 1)) fail("panic_threshold", "must be > 1");
  if (c.scale_down_stabilization_s && !(*c.scale_down_stabilization_s >= 0))
    fail("scale_down_stabilization", "must be >= 0");
  if (c.tolerance < 0 || c.tolerance >= 1) fail("tolerance", "must be in [0, 1)");
  if (!(c.scale_up_max_rate > 1)) fail("scale_up.max_rate", "must be > 1");
  if (!(c.scale_down_max_rate > 1)) fail("scale_down.max_rate", "must be > 1");
  if (c.scale_up_max_step < 0) fail("scale_up.max_step", "must be >= 0");
  if (c.scale_down_max_step < 0) fail("scale_down.max_step", "must be >= 0");
  const auto& t = c.targets;
  for (auto [name, v] : {std::pair{"targets.concurrency_per_replica", t.concurrency_per_replica},
                         std::pair{"targets.queue_per_replica", t.queue_per_replica},
                         std::pair{"targets.gpu_util", t.gpu_util}, std::pair{"targets.kv_usage", t.kv_usage}})
    if (v && !(*v > 0)) fail(name, "must be > 0");
  if (!c.work_model && !detail::has_targets(t))
    fail("targets", "at least one signal target is required when work_model is off");
  for (const auto& s : c.schedule)
    if (s.min_replicas > c.max_replicas) fail("schedule.min_replicas", "must be <= max_replicas");
  if (!(c.headroom >= 0.1) || c.headroom > 10) fail("headroom", "must be in [0.1, 10]");
  const auto& cap = c.capacity;
  if (!(cap.prefill_tokens_per_s > 0) || cap.prefill_tokens_per_s > 1e9)
    fail("capacity.prefill_tokens_per_s", "must be in (0, 1e9]");
  if (!(cap.attention_context_tokens >= 0)) fail("capacity.attention_context_tokens", "must be >= 0");
  if (!(cap.step_s >= 0) || cap.step_s > 60) fail("capacity.step", "must be in [0, 60] s");
  if (!(cap.overhead >= 0) || cap.overhead >= 0.95) fail("capacity.overhead", "must be in [0, 0.95)");
  if (cap.kv_tokens && !(*cap.kv_tokens > 0)) fail("capacity.kv_tokens", "must be > 0");
  if (!(cap.kv_target > 0) || cap.kv_target > 1) fail("capacity.kv_target", "must be in (0, 1]");
  if (cap.max_in_flight && !(*cap.max_in_flight >= 1)) fail("capacity.max_in_flight", "must be >= 1");
  if (!(cap.in_flight_target > 0) || cap.in_flight_target > 1) fail("capacity.in_flight_target", "must be in (0, 1]");
  if (!(c.slo.ttft_s > 0) || c.slo.ttft_s > 3600) fail("slo.ttft", "must be in (0, 3600] s");
  if (!(c.slo.attainment > 0) || c.slo.attainment >= 1) fail("slo.attainment", "must be in (0, 1)");
  if (!(c.slo.window_s >= 10)) fail("slo.window", "must be >= 10 s");
  if (!(c.cold_start_s >= 0) || c.cold_start_s > 7200) fail("cold_start", "must be in [0, 7200] s");
  if (!(c.demand_window_s > 0) || c.demand_short_window_s <= 0 || c.demand_short_window_s > c.demand_window_s)
    fail("demand_window", "must be > 0, with 0 < demand_short_window <= demand_window");
  if (!(c.burst_memory_s >= 0) || c.burst_memory_s > 7 * 86400.0) fail("burst_memory", "must be in [0, 7d]");
  if (!(c.noise_z >= 0) || c.noise_z > 10) fail("noise_z", "must be in [0, 10]");
  if (!(c.learn_s >= 0)) fail("learn", "must be >= 0");
  if (!(c.predictive_period_s >= 0) || c.predictive_period_s > 7 * 86400.0) fail("predictive.period", "must be in [0, 7d]");
  if (!(c.headroom_gain >= 0)) fail("slo_loop.gain", "must be >= 0");
  if (!(c.max_headroom >= 1) || c.max_headroom > 10) fail("slo_loop.max_headroom", "must be in [1, 10]");
  for (const auto& tier : c.tiers) {
    if (tier.name.empty()) fail("tiers.name", "must not be empty");
    if (!(tier.price_fraction >= 0) || tier.price_fraction > 10) fail("tiers." + tier.name + ".price_fraction", "must be in [0, 10]");
    if (!(tier.promotion_s >= 0) || tier.promotion_s > 7200) fail("tiers." + tier.name + ".promotion", "must be in [0, 7200] s");
  }
}

Decision decide(const PolicyConfig& cfg, PolicyState& st, const PolicyInput& in) {
  Decision d;
  d.t = in.t;
  d.active = in.active;
  d.starting = in.starting;
  d.inputs = in.signals;
  d.desired_tiers.assign(cfg.tiers.size(), 0);
  const int capacity = in.active + in.starting;
  if (st.first_t < 0) {
    st.first_t = in.t;
    st.initial_capacity = capacity;
  }
  const double cold = std::max(0.0, in.cold_start_s.value_or(cfg.cold_start_s));

  detail::Tracking tracking;
  if (detail::has_targets(cfg.targets)) tracking = detail::track_targets(cfg, st, in);
  detail::WorkPlan work;
  if (cfg.work_model) work = detail::plan_work(cfg, st, in, cold);
  st.prev_t = in.t;
  d.signals = std::move(tracking.signals);
  d.panic = tracking.panic;
  if (work.any && !work.lost) d.work = work.view;

  int desired;
  if (!tracking.any && !work.any) {
    desired = in.active;
    d.reason_code = "no_signals";
    d.reason = "no signals: holding " + std::to_string(in.active) + " active";
  } else if (work.any && (!tracking.any || work.active >= tracking.desired)) {
    desired = work.active;
    d.desired_tiers = work.tiers;
    d.reason_code = work.reason_code;
    d.reason = work.reason;
    if (tracking.any) d.reason += "; target tracking wants " + std::to_string(tracking.desired);
  } else {
    desired = tracking.desired;
    d.reason_code = tracking.reason_code;
    d.reason = tracking.reason;
    if (work.any) d.desired_tiers = work.tiers, d.reason += "; work model wants " + std::to_string(work.active);
  }

  // Scale-down stabilisation: a dip must last the whole window before capacity goes. By
  // default the window is a cold start: capacity released and needed again sooner cost more
  // GPU time than it saved, and its users waited for it.
  const double window = cfg.scale_down_stabilization_s.value_or(cold);
  // A release for a quiet gap has its own break-even: the fleet is started again before the next
  // burst can come (quiet_gap.h), so what the window guards against is already priced.
  if (work.quiet_gap && desired == work.active) st.recommendations.clear(), st.plan_recommendations.clear();
  const int tiers_sum = std::accumulate(d.desired_tiers.begin(), d.desired_tiers.end(), 0);
  // Starts in progress are capacity too: cancelling one for a dip throws its load time away.
  const int held = hold_highest(st.recommendations, in.t, window, in.decided_elsewhere ? std::max(desired, in.active) : desired);
  if (held > desired && desired < capacity) {
    d.reason_code = "stabilised";
    d.reason = "stabilised: holding max recommendation " + std::to_string(std::min(held, capacity)) + " of last " +
               fmt("%.0f", window) + "s (raw " + std::to_string(desired) + "; " + d.reason + ")";
    desired = std::min(held, capacity);  // stabilisation never causes a scale-up
  }
  // Standby capacity is stabilised the same way, as the plan's total.
  const int own_plan = work.any ? work.active + tiers_sum : desired;
  const int plan = hold_highest(st.plan_recommendations, in.t, window,
                                in.decided_elsewhere ? std::max(own_plan, in.active + in.warm) : own_plan);

  // Step limits.
  if (desired > capacity) {
    // From zero the rate applies to one replica, or a cold start would crawl up one by one.
    const int base = std::max(1, capacity);
    int limit = std::max(static_cast<int>(std::floor(base * cfg.scale_up_max_rate + 1e-9)), capacity + 1);
    if (cfg.scale_up_max_step > 0) limit = std::min(limit, capacity + cfg.scale_up_max_step);
    if (desired > limit) {
      d.reason_code = "rate_limited";
      d.reason = "rate limited: up to " + std::to_string(limit) + " (wanted " + std::to_string(desired) + ")";
      desired = limit;
    }
  } else if (desired < in.active) {
    int floor_ = static_cast<int>(std::floor(in.active / cfg.scale_down_max_rate + 1e-9));
    if (cfg.scale_down_max_step > 0) floor_ = std::max(floor_, in.active - cfg.scale_down_max_step);
    if (desired < floor_) {
      d.reason_code = "rate_limited";
      d.reason = "rate limited: down to " + std::to_string(floor_) + " (wanted " + std::to_string(desired) + ")";
      desired = floor_;
    }
  }

  // Bounds, scheduled floors last: they are hard limits.
  int floor_min = cfg.min_replicas;
  bool scheduled = false;
  for (const auto& s : cfg.schedule)
    if (schedule_applies(s, in) && s.min_replicas > floor_min) floor_min = s.min_replicas, scheduled = true;
  if (desired < floor_min) {
    d.reason_code = scheduled ? "scheduled_min" : "min_replicas";
    d.reason = (scheduled ? "scheduled minimum " : "min_replicas ") + std::to_string(floor_min) + " (wanted " +
               std::to_string(desired) + ")";
    desired = floor_min;
  }
  if (desired > cfg.max_replicas) {
    d.reason_code = "max_replicas";
    d.reason = "max_replicas " + std::to_string(cfg.max_replicas) + " (wanted " + std::to_string(desired) + ")";
    desired = cfg.max_replicas;
  }
  // The cheapest tier holds what the plan's (held) total keeps beyond the active replicas: when
  // a burst wakes standby replicas, the standby wanted shrinks by as many (no refill churn).
  if (!d.desired_tiers.empty()) {
    const auto order = detail::usable_tiers(cfg, cold);
    if (!order.empty()) {
      int others = 0;
      for (std::size_t k = 0; k + 1 < order.size(); ++k) others += d.desired_tiers[order[k]];
      d.desired_tiers[order.back()] = std::max(0, plan - desired - others);
    }
  }
  // Standby replicas count against max_replicas too.
  int room = cfg.max_replicas - desired;
  for (auto& n : d.desired_tiers) {
    n = std::clamp(n, 0, room);
    room -= n;
  }

  d.desired = desired;
  if (desired > capacity) {
    d.direction = Direction::kUp;
  } else if (desired < in.active) {
    d.direction = Direction::kDown;
  } else {
    d.direction = Direction::kHold;
    if (desired > in.active) {
      d.reason_code = "starting_covers";
      d.reason += "; " + std::to_string(in.starting) + " starting cover it";
    }
  }
  return d;
}

}  // namespace tidegate::scaler
