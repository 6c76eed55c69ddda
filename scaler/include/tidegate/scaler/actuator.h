#pragma once
// How replicas come and go: one interface, three engines (local processes, Kubernetes
// Deployments, a fixed list). The lifecycle controller owns the states; an actuator only
// starts, stops and reports what it sees. Calls come from the scaler's thread only.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tidegate/scaler/routing.h"

namespace tidegate::scaler {

struct ObservedReplica {
  std::string id;
  Endpoint endpoint;
  bool ready = false;   // health endpoint answers 200 / EndpointSlice condition ready
  bool exited = false;  // the process died / the pod is terminating or gone
  std::string detail;   // why it exited, for the report
  // Only in a leader's published view (file-lock election): the leader is draining it, so a
  // follower routes nothing new to it and lets its own requests there finish.
  bool draining = false;
};

struct PoolObservation {
  std::vector<ObservedReplica> replicas;
  // Replicas asked for but not visible yet (Kubernetes: spec.replicas minus endpoints).
  int pending = 0;
};

struct ActuatorStats {
  std::uint64_t errors = 0;   // API / spawn failures (after retries)
  std::uint64_t retries = 0;  // retried API calls
  std::string last_error;
};

class Actuator {
 public:
  virtual ~Actuator() = default;
  virtual std::string_view kind() const = 0;
  // False for fixed pools: the controller then only routes what it is given.
  virtual bool elastic() const = 0;
  // Asks for one more replica; `for_warm_pool` picks the warm Deployment on Kubernetes.
  // Returns false on failure (counted in stats).
  virtual bool start(bool for_warm_pool) = 0;
  // Stops a replica (graceful first). An id not (yet) observed cancels one pending start.
  virtual void stop(const std::string& id) = 0;
  virtual PoolObservation observe() = 0;
  virtual ActuatorStats stats() const = 0;

  // The standby tier: park a ready, unrouted replica (its engine asleep, GPU memory released:
  // vLLM's POST /sleep) and wake it again (POST /wake_up); it reports not ready until awake.
  // False when the actuator or the engine cannot; the replica then stays as it was.
  virtual bool park(const std::string& id) { return false; }
  virtual bool unpark(const std::string& id) { return false; }
};

}  // namespace tidegate::scaler
