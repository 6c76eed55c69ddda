#pragma once
// All models' replica pools, keyed by model name. It is the gateway side of the scaler's
// interfaces: RoutingTarget (activate/drain/remove) and SignalSource (demand per model).
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "replica_pool.h"
#include "tidegate/gateway/config.h"
#include "tidegate/scaler/routing.h"

namespace tidegate::gateway {

class Upstreams final : public scaler::RoutingTarget, public scaler::SignalSource {
 public:
  explicit Upstreams(const GatewayConfig& config);
  // Config reload: models added/removed, static replicas reconciled; scaler replicas kept.
  void reconcile(const GatewayConfig& config);
  std::shared_ptr<ReplicaPool> find(const std::string& model) const;
  std::vector<std::shared_ptr<ReplicaPool>> pools() const;
  // Every pool's ReplicaPool::on_new_replica, now and for pools a reload adds.
  void on_new_replica(ReplicaPool::NewReplicaHook hook);

  void activate(const std::string& model, const std::string& replica_id, const scaler::Endpoint& endpoint) override;
  void drain(const std::string& model, const std::string& replica_id, std::function<void()> on_drained) override;
  void remove(const std::string& model, const std::string& replica_id) override;
  scaler::GatewaySignals sample(const std::string& model) const override;

 private:
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<ReplicaPool>> pools_;
  ReplicaPool::NewReplicaHook new_replica_hook_;  // guarded by mu_
};

}  // namespace tidegate::gateway
