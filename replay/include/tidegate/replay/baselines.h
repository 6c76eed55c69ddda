#pragma once
// The autoscalers Tidegate is compared against, written from their public specifications
// (algorithms and defaults documented in replay/README.md). Pure: state advances only through
// observe()/decide() with virtual time.
#include <deque>
#include <utility>

#include "tidegate/replay/policy.h"

namespace tidegate::replay {

// A fixed fleet: always N active, no warm pool.
class StaticPolicy final : public ScalingPolicy {
 public:
  explicit StaticPolicy(int replicas) : n_(replicas) {}
  std::string name() const override { return "static-" + std::to_string(n_); }
  double decide_period_s() const override { return 60; }
  ScaleTarget decide(const ClusterObservation&) override { return {n_, 0}; }

 private:
  int n_;
};

// Kubernetes HorizontalPodAutoscaler (autoscaling/v2) defaults: 15 s sync period, 10 %
// tolerance, 300 s scale-down stabilisation (the highest recommendation of the window wins),
// scale-up limited to max(4 pods, +100 %) per period. Not-ready pods count as 0 % utilised
// when scaling up, as the HPA controller does. Utilisation = requests on replicas divided by
// the profile's capacity_per_replica.
struct HpaConfig {
  double target_utilization = 0.7;
  double sync_period_s = 15;
  double tolerance = 0.1;
  double scale_down_stabilization_s = 300;
  int scale_up_pods = 4;
  double scale_up_percent = 100;
};

class HpaPolicy final : public ScalingPolicy {
 public:
  explicit HpaPolicy(HpaConfig config) : cfg_(config) {}
  std::string name() const override { return "hpa"; }
  double decide_period_s() const override { return cfg_.sync_period_s; }
  void observe(const ClusterObservation& obs) override;
  ScaleTarget decide(const ClusterObservation& obs) override;

 private:
  HpaConfig cfg_;
  double util_sum_ = 0;  // time-weighted utilisation since the last decision (metrics window)
  double util_time_ = 0;
  std::deque<std::pair<double, int>> recommendations_;  // (t, desired) within the window
};

// Knative Pod Autoscaler defaults: stable window 60 s, panic window 10 % of it (6 s), panic
// threshold 200 %, target utilisation 70 %, 2 s tick, max scale-up rate 1000x, max
// scale-down rate 2 (at most halve per tick). Concurrency = queued + in-flight requests.
struct KpaConfig {
  double target_concurrency = 0;  // per replica; 0 = the profile's capacity_per_replica
  double target_utilization = 0.7;
  double stable_window_s = 60;
  double panic_window_s = 6;
  double panic_threshold = 2.0;
  double tick_s = 2;
  double max_scale_up_rate = 1000;
  double max_scale_down_rate = 2;
};

class KpaPolicy final : public ScalingPolicy {
 public:
  explicit KpaPolicy(KpaConfig config) : cfg_(config) {}
  std::string name() const override { return "kpa"; }
  double decide_period_s() const override { return cfg_.tick_s; }
  void observe(const ClusterObservation& obs) override;
  ScaleTarget decide(const ClusterObservation& obs) override;
  bool in_panic() const { return panic_since_ >= 0; }

 private:
  double window_average(double window_s, double now) const;
  KpaConfig cfg_;
  std::deque<std::pair<double, double>> samples_;  // (t, concurrency)
  double panic_since_ = -1;    // start of the current panic; -1 when not panicking
  double last_panic_seen_ = -1;
  int panic_floor_ = 0;        // in panic the KPA never scales below its previous decision
};

}  // namespace tidegate::replay
