#include "tidegate/scaler/policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace tidegate::scaler {
namespace {

// ceil that forgives floating noise: 4.0000000001 replicas is 4, not 5.
int ceil_count(double x) { return x <= 0 ? 0 : static_cast<int>(std::ceil(x - 1e-9)); }

std::optional<double> window_mean(const std::deque<std::pair<double, Signals>>& samples, double since,
                                  std::optional<double> Signals::*field) {
  double sum = 0;
  int n = 0;
  for (const auto& [t, s] : samples) {
    if (t <= since || !(s.*field)) continue;
    sum += *(s.*field);
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

std::string fmt(const char* format, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, a);
  return buf;
}

bool schedule_applies(const ScheduledMinimum& s, const PolicyInput& in) {
  if (!in.time_of_day_s) return false;
  if (in.weekday >= 0 && !(s.days_mask & (1u << in.weekday))) return false;
  const double tod = *in.time_of_day_s;
  return s.from_s <= s.to_s ? (tod >= s.from_s && tod < s.to_s) : (tod >= s.from_s || tod < s.to_s);
}

struct SignalSpec {
  const char* name;
  std::optional<double> Signals::*field;
  std::optional<double> SignalTargets::*target;
  bool demand;  // totals (desired = total/target); otherwise per-replica means (desired = active*u/target)
};

constexpr SignalSpec kSpecs[] = {
    {"concurrency", &Signals::concurrency, &SignalTargets::concurrency_per_replica, true},
    {"queue", &Signals::queue, &SignalTargets::queue_per_replica, true},
    {"gpu_util", &Signals::gpu_util, &SignalTargets::gpu_util, false},
    {"kv_usage", &Signals::kv_usage, &SignalTargets::kv_usage, false},
};

// Desired replicas for one signal value, with the tolerance band applied.
int desired_for(const SignalSpec& spec, double value, double target, int active, int capacity, double tolerance,
                bool* within) {
  if (spec.demand) {
    const int raw = ceil_count(value / target);
    *within = capacity > 0 && std::abs(value / (target * capacity) - 1.0) <= tolerance + 1e-9;
    return *within ? capacity : raw;
  }
  *within = active > 0 && std::abs(value / target - 1.0) <= tolerance + 1e-9;
  return *within ? active : ceil_count(active * value / target);
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
  if (c.scale_down_stabilization_s < 0) fail("scale_down_stabilization", "must be >= 0");
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
  if (!t.concurrency_per_replica && !t.queue_per_replica && !t.gpu_util && !t.kv_usage)
    fail("targets", "at least one signal target is required");
  for (const auto& s : c.schedule)
    if (s.min_replicas > c.max_replicas) fail("schedule.min_replicas", "must be <= max_replicas");
}

Decision decide(const PolicyConfig& cfg, PolicyState& st, const PolicyInput& in) {
  Decision d;
  d.t = in.t;
  d.active = in.active;
  d.starting = in.starting;
  d.inputs = in.signals;
  const int capacity = in.active + in.starting;

  st.samples.emplace_back(in.t, in.signals);
  while (!st.samples.empty() && st.samples.front().first <= in.t - cfg.stable_window_s) st.samples.pop_front();

  int stable = -1, panic = -1;
  const SignalSpec* stable_by = nullptr;
  const SignalSpec* panic_by = nullptr;
  bool stable_within = false;
  for (const auto& spec : kSpecs) {
    const auto target = cfg.targets.*spec.target;
    if (!target) continue;
    const auto sv = window_mean(st.samples, in.t - cfg.stable_window_s, spec.field);
    const auto pv = window_mean(st.samples, in.t - cfg.panic_window_s, spec.field);
    if (!sv) continue;  // missing signal: the others decide
    SignalRecommendation r;
    r.signal = spec.name;
    r.target = *target;
    r.stable_value = *sv;
    r.panic_value = pv.value_or(*sv);
    bool panic_within = false;
    r.stable_desired = desired_for(spec, *sv, *target, in.active, capacity, cfg.tolerance, &r.within_tolerance);
    r.panic_desired = desired_for(spec, r.panic_value, *target, in.active, capacity, cfg.tolerance, &panic_within);
    if (r.stable_desired > stable) stable = r.stable_desired, stable_by = &spec, stable_within = r.within_tolerance;
    if (r.panic_desired > panic) panic = r.panic_desired, panic_by = &spec;
    d.signals.push_back(std::move(r));
  }

  int desired;
  if (stable < 0) {
    desired = in.active;
    d.reason_code = "no_signals";
    d.reason = "no signals: holding " + std::to_string(in.active) + " active";
  } else {
    desired = stable;
    d.reason_code = stable_within ? "within_tolerance" : "target_tracking";
    d.reason = std::string(stable_by->name) + (stable_within ? " within tolerance: " : " wants ") +
               std::to_string(stable) + " over the stable window";

    // Panic: short-window demand far above what we have (or any demand at zero).
    const bool from_zero = capacity == 0 && panic > 0;
    if (from_zero || (capacity > 0 && panic >= cfg.panic_threshold * capacity)) {
      if (!st.panicking) st.panic_desired = 0;
      st.panicking = true;
      st.last_panic_t = in.t;
    } else if (st.panicking && in.t - st.last_panic_t >= cfg.stable_window_s) {
      st.panicking = false;
    }
    if (st.panicking) {
      const int held = std::max({panic, stable, st.panic_desired, in.active});
      st.panic_desired = held;
      desired = held;
      d.panic = true;
      if (from_zero) {
        d.reason_code = "from_zero";
        d.reason = std::string(panic_by->name) + " demand at zero capacity: starting " + std::to_string(held);
      } else {
        d.reason_code = "panic";
        d.reason = "panic: " + std::string(panic_by->name) + " demand " +
                   fmt("%.1f", capacity > 0 ? double(panic) / capacity : 0.0) + "x capacity, holding " +
                   std::to_string(held);
      }
    }
  }

  // Scale-down stabilisation: a dip must last the whole window before capacity goes.
  st.recommendations.emplace_back(in.t, desired);
  while (!st.recommendations.empty() && st.recommendations.front().first < in.t - cfg.scale_down_stabilization_s)
    st.recommendations.pop_front();
  int held = desired;
  for (const auto& r : st.recommendations) held = std::max(held, r.second);
  if (held > desired && desired < in.active) {
    d.reason_code = "stabilised";
    d.reason = "stabilised: holding max recommendation " + std::to_string(std::min(held, in.active)) + " of last " +
               fmt("%.0f", cfg.scale_down_stabilization_s) + "s (raw " + std::to_string(desired) + ")";
    desired = std::min(held, in.active);  // stabilisation never causes a scale-up
  }

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
