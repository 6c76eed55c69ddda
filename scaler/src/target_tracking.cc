#include "target_tracking.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tidegate::scaler::detail {
namespace {

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

int ceil_count(double x) { return x <= 0 ? 0 : static_cast<int>(std::ceil(x - 1e-9)); }

std::string fmt(const char* format, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, a);
  return buf;
}

bool has_targets(const SignalTargets& t) {
  return t.concurrency_per_replica || t.queue_per_replica || t.gpu_util || t.kv_usage;
}

Tracking track_targets(const PolicyConfig& cfg, PolicyState& st, const PolicyInput& in) {
  Tracking out;
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
    out.signals.push_back(std::move(r));
  }
  if (stable < 0) return out;

  out.any = true;
  out.desired = stable;
  out.reason_code = stable_within ? "within_tolerance" : "target_tracking";
  out.reason = std::string(stable_by->name) + (stable_within ? " within tolerance: " : " wants ") +
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
    out.desired = held;
    out.panic = true;
    if (from_zero) {
      out.reason_code = "from_zero";
      out.reason = std::string(panic_by->name) + " demand at zero capacity: starting " + std::to_string(held);
    } else {
      out.reason_code = "panic";
      out.reason = "panic: " + std::string(panic_by->name) + " demand " +
                   fmt("%.1f", capacity > 0 ? double(panic) / capacity : 0.0) + "x capacity, holding " +
                   std::to_string(held);
    }
  }
  return out;
}

}  // namespace tidegate::scaler::detail
