#pragma once
// The live scaler: one thread ticking every `tick` (1 s): sample signals, decide (pure
// policy), step each pool's lifecycle controller through its actuator. The gateway owns it:
//
//   auto cfg = tidegate::scaler::parse_scaler_config(root["scaler"], "scaler");
//   tidegate::scaler::ScalerOptions opts;
//   opts.listener = [&](auto& id, auto& model, auto& cls, auto state, double t) {
//     costs.replica_state(id, model, cls, state, t); };
//   tidegate::scaler::Scaler scaler(cfg, routing_target, &signal_source, &registry, opts);
//   scaler.start();           // ... scaler.stop() before routing_target goes away
#include <boost/json.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tidegate/scaler/config.h"
#include "tidegate/scaler/leader_election.h"
#include "tidegate/scaler/lifecycle.h"
#include "tidegate/scaler/policy.h"
#include "tidegate/scaler/routing.h"
#include "tidegate/scaler/sampler.h"

namespace prometheus {
class Registry;
}

namespace tidegate::scaler {

struct ScalerOptions {
  // Seconds on a monotonic clock; passed to listeners and decisions. Default: steady_clock.
  std::function<double()> clock;
  // Unix seconds, for the admin API's times. Default: system_clock.
  std::function<double()> wall_clock;
  StateListener listener;
  // Builds each pool's actuator; default picks by config kind.
  std::function<std::unique_ptr<Actuator>(const ModelPoolConfig&)> make_actuator;
  // GET for /metrics scrapes and DCGM; default: HTTP with a 500 ms deadline.
  Fetcher fetch;
  // With leader_election configured: builds the elector; default make_leader_elector.
  std::function<std::unique_ptr<LeaderElector>(const LeaderElectionConfig&)> make_elector;
};

class ScalerMetrics;
class SharedObservationFile;

class Scaler final {
 public:
  // `signals` may be null (engine metrics only); `registry` may be null (no metrics).
  // Both `routing` and `signals` must outlive the Scaler (or stop() must have returned).
  Scaler(std::shared_ptr<const ScalerConfig> config, RoutingTarget& routing, const SignalSource* signals,
         prometheus::Registry* registry, ScalerOptions options = {});
  ~Scaler();
  Scaler(const Scaler&) = delete;
  Scaler& operator=(const Scaler&) = delete;

  void start();  // spawns the tick thread (and the elector's); the first tick runs at once
  // Stops the thread; with stop_replicas, replicas are removed from routing and stopped.
  void stop(bool stop_replicas = true);

  // One pass over every pool. The thread calls it; tests may call it when not started.
  void tick();

  // Whether this scaler may change the fleet now (always without leader_election).
  bool acting() const;

  // GET /admin/scaler: the election role and holder, per pool limits, replica states, recent decisions (identical holds
  // collapsed, with a count), the ups and downs alone, faults and missing signals.
  boost::json::object admin_state() const;
  // Admin call: changes min/max replicas at run time. False (with *error) for an unknown
  // model or min > max, min < 0, min == 0 without scale_to_zero.
  bool set_limits(const std::string& model, int min_replicas, int max_replicas, std::string* error = nullptr);

  // The latest decision of each record of the admin list, oldest first.
  std::vector<Decision> recent_decisions(const std::string& model) const;
  PoolCounts counts(const std::string& model) const;
  // The routed replicas' prefix-cache hit ratios from their engines' counters ("host:port").
  std::map<std::string, double> prefix_hit_ratios(const std::string& model) const;

 private:
  struct Pool;
  void tick_pool(Pool& pool, double now);
  double now() const;

  std::shared_ptr<const ScalerConfig> config_;
  RoutingTarget& routing_;
  const SignalSource* signals_;
  ScalerOptions options_;
  std::unique_ptr<ScalerMetrics> metrics_;
  std::unique_ptr<NvmlGpuUtil> nvml_;
  std::unique_ptr<LeaderElector> elector_;  // null: no election, this scaler always acts
  std::unique_ptr<SharedObservationFile> shared_;  // kind file: the leader's replicas for the others
  std::vector<std::unique_ptr<Pool>> pools_;

  std::mutex tick_mutex_;            // one tick at a time (thread vs. a direct call)
  bool tick_acts_ = false;           // this tick's role, read by the fence (tick_mutex_)
  mutable std::mutex state_mutex_;   // guards the snapshots the admin API reads, and limits
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tidegate::scaler
