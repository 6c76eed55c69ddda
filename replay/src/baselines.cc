#include "tidegate/replay/baselines.h"

#include <algorithm>
#include <cmath>

namespace tidegate::replay {

void HpaPolicy::observe(const ClusterObservation& obs) {
  // Unready pods count as 0 % when scaling up: divide by spec replicas, not ready ones.
  const int spec = std::max(1, obs.active + obs.starting_for_active);
  const double util = static_cast<double>(obs.in_flight) / (spec * obs.capacity_per_replica);
  util_sum_ += util * obs.period_s;
  util_time_ += obs.period_s;
}

ScaleTarget HpaPolicy::decide(const ClusterObservation& obs) {
  const int current = std::max(1, obs.active + obs.starting_for_active);
  const double util = util_time_ > 0 ? util_sum_ / util_time_ : 0;
  util_sum_ = util_time_ = 0;
  const double ratio = util / cfg_.target_utilization;
  int desired = current;
  if (std::fabs(ratio - 1.0) > cfg_.tolerance) desired = static_cast<int>(std::ceil(current * ratio - 1e-9));
  desired = std::max(desired, 1);
  const int up_limit = std::max(current + cfg_.scale_up_pods,
                                static_cast<int>(std::ceil(current * (1 + cfg_.scale_up_percent / 100))));
  desired = std::min(desired, up_limit);

  recommendations_.emplace_back(obs.t, desired);
  while (!recommendations_.empty() && recommendations_.front().first < obs.t - cfg_.scale_down_stabilization_s)
    recommendations_.pop_front();
  if (desired < current) {
    int highest = desired;
    for (const auto& [t, r] : recommendations_) highest = std::max(highest, r);
    desired = std::min(current, highest);
  }
  return {desired, 0};
}

void KpaPolicy::observe(const ClusterObservation& obs) {
  samples_.emplace_back(obs.t, static_cast<double>(obs.in_flight + obs.queue_depth));
  while (!samples_.empty() && samples_.front().first <= obs.t - cfg_.stable_window_s) samples_.pop_front();
}

double KpaPolicy::window_average(double window_s, double now) const {
  double sum = 0;
  int n = 0;
  for (auto it = samples_.rbegin(); it != samples_.rend() && it->first > now - window_s; ++it) {
    sum += it->second;
    ++n;
  }
  return n ? sum / n : 0;
}

ScaleTarget KpaPolicy::decide(const ClusterObservation& obs) {
  const double per_replica =
      (cfg_.target_concurrency > 0 ? cfg_.target_concurrency : obs.capacity_per_replica) * cfg_.target_utilization;
  const double stable = window_average(cfg_.stable_window_s, obs.t);
  const double panic = window_average(cfg_.panic_window_s, obs.t);
  const int desired_stable = static_cast<int>(std::ceil(stable / per_replica - 1e-9));
  const int desired_panic = static_cast<int>(std::ceil(panic / per_replica - 1e-9));
  const int ready = std::max(1, obs.active);

  if (static_cast<double>(desired_panic) / ready >= cfg_.panic_threshold) {
    if (panic_since_ < 0) panic_since_ = obs.t;
    last_panic_seen_ = obs.t;
  } else if (panic_since_ >= 0 && obs.t - last_panic_seen_ >= cfg_.stable_window_s) {
    panic_since_ = -1;  // a whole stable window without the panic condition
  }

  int desired;
  if (panic_since_ >= 0) {
    desired = std::max(desired_panic, panic_floor_);  // never scale down while panicking
  } else {
    desired = desired_stable;
  }
  const int max_up = static_cast<int>(std::ceil(cfg_.max_scale_up_rate * ready));
  const int min_down = static_cast<int>(std::floor(ready / cfg_.max_scale_down_rate));
  desired = std::clamp(desired, std::max(min_down, 1), std::max(max_up, 1));
  panic_floor_ = panic_since_ >= 0 ? desired : 0;
  return {desired, 0};
}

}  // namespace tidegate::replay
