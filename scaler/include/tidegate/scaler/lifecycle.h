#pragma once
// Replica lifecycle of one model pool: starting -> warm -> active -> draining -> stopped.
// A plain state machine driven by step(now, desired): no clock or thread of its own, so
// tests drive it with a fake actuator and fake time, and the live Scaler ticks it.
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tidegate/common/replica_state.h"
#include "tidegate/scaler/actuator.h"
#include "tidegate/scaler/routing.h"

namespace tidegate::scaler {

struct LifecycleConfig {
  int warm_pool_size = 0;          // ready, unrouted replicas kept for instant scale-up
  // Ceiling on engines running (active + warm + standby + starting): the warm pool fills only
  // what the active and standby replicas leave under it, so max_replicas bounds the cost.
  // Draining replicas are on their way out and not counted. 0 = no ceiling.
  int max_replicas = 0;
  double startup_timeout_s = 600;  // never healthy within this: stopped, replaced, reported
  double drain_timeout_s = 900;    // generous: in-flight generations finish before a stop
  int max_parallel_starts = 0;     // 0 = unlimited
  // An active replica the gateway has held unhealthy this long (alive but hung, say) is
  // removed, stopped and replaced. 0 = never.
  double unhealthy_replace_after_s = 120;
};

// Cost accounting charges by state, so every transition is published.
using StateListener = std::function<void(const std::string& replica_id, const std::string& model,
                                         const std::string& replica_class, ReplicaState state, double t)>;

struct ReplicaInfo {
  std::string id;
  Endpoint endpoint;
  ReplicaState state = ReplicaState::kStarting;
  double since = 0;           // entered this state
  double created = 0;         // asked for / first seen
  bool placeholder = false;   // asked for, not visible yet (Kubernetes pending pod)
  bool drain_to_warm = false; // demotion: back to the warm pool once drained
  bool waking = false;        // starting again from standby (not a new replica)
  double unhealthy_since = -1; // gateway reports it unhealthy since (active only)
  bool leaving = false;       // a follower's view: the leader is draining it (never routed again here)
};

// Faults and notable transitions, kept for GET /admin/scaler.
struct PoolEvent {
  double t = 0;
  std::string replica_id;
  std::string kind;  // "startup_timeout", "died", "died_starting", "unhealthy", "drain_timeout", "start_failed"
  std::string detail;
};

struct PoolCounts {
  int starting = 0, warm = 0, active = 0, draining = 0, standby = 0;
};

// What the policy counts as capacity on its way to routed traffic: starts, less those that only
// refill the warm pool, plus ready replicas beyond the warm pool. A start asked for demand that
// became ready between two ticks is such capacity, not a spare: counted, the scale-down
// stabilisation holds it through a dip of the next tick, where the surplus path would stop
// the replica it had just started. The live scaler and the replay both build their input so.
int capacity_on_the_way(const PoolCounts& counts, int warm_target);

class PoolController final {
 public:
  PoolController(std::string model, std::string replica_class, LifecycleConfig config, Actuator& actuator,
                 RoutingTarget& routing, StateListener listener = {});
  ~PoolController();
  PoolController(const PoolController&) = delete;
  PoolController& operator=(const PoolController&) = delete;

  // One control step: reconcile with what the actuator sees, then move toward
  // `desired_active` routed replicas plus the warm pool plus `desired_standby` parked ones.
  // `gateway` (optional) picks the least busy replica to drain.
  void step(double now, int desired_active, const GatewaySignals* gateway = nullptr, int desired_standby = 0);

  // Stops routing and stops every replica (shutdown); drains are not awaited.
  void shutdown(double now);

  PoolCounts counts() const;
  std::vector<ReplicaInfo> replicas() const;
  const std::deque<PoolEvent>& events() const { return events_; }
  std::uint64_t replaced_total() const { return replaced_; }
  // How long replicas of this pool took from being asked for to being ready (a moving average
  // of the starts seen), for the policy's cost of a cold start; nullopt before the first.
  std::optional<double> measured_startup_s() const { return startup_s_; }
  const LifecycleConfig& config() const { return config_; }
  void set_warm_pool_size(int n) { config_.warm_pool_size = n; }
  void set_max_replicas(int n) { config_.max_replicas = n; }
  // The warm pool the last step kept: warm_pool_size, or less where max_replicas leaves less.
  int warm_target() const { return warm_target_; }
  // Replicas other gateways still send requests to (their ids here), as the next steps should
  // see them: a drain here is not finished while another gateway holds the replica, so that
  // stopping it cannot cut their streams. The drain timeout still bounds the wait.
  void set_held_elsewhere(std::set<std::string> ids) { held_elsewhere_ = std::move(ids); }

 private:
  struct Record {
    ReplicaInfo info;
    std::shared_ptr<std::atomic<bool>> drained;  // set by on_drained from any thread
  };

  void set_state(Record& r, ReplicaState s, double now);
  void reconcile(double now, const PoolObservation& obs);
  void expire(double now);
  void replace_unhealthy(double now, const GatewaySignals& gateway);
  void converge(double now, int desired_active, const GatewaySignals* gateway, int desired_standby);
  void stop_replica(Record& r, double now, bool routed);
  void report(double now, const std::string& id, const std::string& kind, const std::string& detail);
  void forget_stopped();

  std::string model_;
  std::string class_;
  LifecycleConfig config_;
  Actuator& actuator_;
  RoutingTarget& routing_;
  StateListener listener_;
  std::vector<Record> records_;
  std::set<std::string> tombstones_;  // stopped ids an actuator may still list for a while
  std::deque<PoolEvent> events_;
  std::uint64_t next_placeholder_ = 0;
  std::uint64_t replaced_ = 0;
  std::optional<double> startup_s_;
  int warm_target_ = 0;
  std::set<std::string> held_elsewhere_;
};

}  // namespace tidegate::scaler
