#pragma once
// What every autoscaling policy sees and says in the replay. The replay is the actuator: it
// turns a ScaleTarget into cold starts, warm promotions, drains and stops, the same way for
// every policy, so that policies differ only in their decisions.
#include <array>
#include <functional>
#include <memory>
#include <string>

#include "tidegate/scaler/actuator.h"
#include "tidegate/scaler/routing.h"

namespace tidegate::replay {

// One sample of the simulated cluster, taken every ReplayOptions::sample_period_s.
struct ClusterObservation {
  double t = 0;
  double period_s = 1;          // time since the previous observation
  // Replicas by state. `starting` counts cold starts (for active or for the warm pool) and
  // warm->active promotions in progress; `promoting` is the subset being promoted.
  int active = 0;
  int starting = 0;
  int starting_for_active = 0;  // includes promoting
  int promoting = 0;
  int warm = 0;
  int draining = 0;
  int standby = 0;              // parked in the standby tier
  // The gateway's admission queue (requests not yet sent to a replica).
  std::size_t queue_depth = 0;
  double oldest_wait_s = 0;
  double queue_wait_p90_s = 0;  // of requests dispatched during the last period
  // Requests on replicas (in the engines' batches or waiting inside the engines).
  std::size_t in_flight = 0;
  int running = 0;              // sum of engine batch sizes (active + draining replicas)
  double kv_usage = 0;          // mean KV-cache usage over active replicas, [0, 1]
  double busy_fraction = 0;     // active replicas with a non-empty batch (what DCGM GPU_UTIL sees)
  // Demand.
  std::size_t arrivals = 0;     // requests that arrived during the last period
  std::int64_t arrival_prompt_tokens = 0;  // their prompt tokens
  std::array<double, 24> arrival_prompt_sizes{};  // their sizes, scaler::PromptSizes buckets
  double ttft_p90_s = 0;        // of first tokens during the last period (0 when none)
  std::size_t first_tokens = 0;      // first tokens during the last period ...
  std::size_t first_tokens_in_slo = 0;  // ... of which within the TTFT objective
  // Work in the system.
  std::int64_t queued_prompt_tokens = 0;   // prompts in the admission queue
  std::int64_t engine_backlog_tokens = 0;  // prompt tokens the engines have yet to prefill
  std::int64_t kv_used_tokens = 0;         // KV held by running requests, active replicas
  double prefix_hit_ratio = 0;             // cached / queried prompt tokens during the period
  bool prefix_queried = false;             // some prompt was looked up during the period
  // Capacity constants, so utilisation policies need no side channel.
  int slots_per_replica = 1;    // concurrent requests the gateway sends one replica
  double capacity_per_replica = 1;  // requests in flight one replica sustains within the SLO
  double cold_start_s = 0;          // of the profile: what a start costs in time
};

struct ScaleTarget {
  int active = 0;  // replicas serving traffic (clamped to [replicas_min, replicas_max])
  int warm = 0;    // loaded, idle, not routed; promoted in seconds instead of a cold start
};

class ScalingPolicy {
 public:
  virtual ~ScalingPolicy() = default;
  virtual std::string name() const = 0;
  // How often decide() runs. observe() runs at every sample (at least as often).
  virtual double decide_period_s() const = 0;
  virtual void observe(const ClusterObservation& obs) {}
  virtual ScaleTarget decide(const ClusterObservation& obs) = 0;

  // A policy that brings its own lifecycle controller (Tidegate's scaler::PoolController)
  // gets control() instead of decide() + the replay's actuator: it acts on the simulated fleet
  // through the same Actuator and RoutingTarget interfaces the live controller uses. `apply`
  // is false during the warm-up (observe and decide, do not act).
  virtual bool drives_lifecycle() const { return false; }
  virtual void control(const ClusterObservation& obs, bool apply, scaler::Actuator& actuator,
                       scaler::RoutingTarget& routing) {}
};

using PolicyFactory = std::function<std::unique_ptr<ScalingPolicy>()>;

}  // namespace tidegate::replay
