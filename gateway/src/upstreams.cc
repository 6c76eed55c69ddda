#include "upstreams.h"

#include <mutex>

#include "tidegate/common/log.h"

namespace tidegate::gateway {

Upstreams::Upstreams(const GatewayConfig& config) {
  for (const auto& m : config.models) pools_[m.name] = std::make_shared<ReplicaPool>(m);
}

void Upstreams::reconcile(const GatewayConfig& config) {
  std::vector<std::shared_ptr<ReplicaPool>> added;
  ReplicaPool::NewReplicaHook hook;
  {
    std::unique_lock lock(mu_);
    std::unordered_map<std::string, std::shared_ptr<ReplicaPool>> next;
    for (const auto& m : config.models) {
      auto it = pools_.find(m.name);
      if (it != pools_.end()) {
        it->second->update_config(m);
        next[m.name] = it->second;
      } else {
        added.push_back(next[m.name] = std::make_shared<ReplicaPool>(m));
      }
    }
    // Requests in flight on a dropped model hold their pool and finish normally.
    pools_ = std::move(next);
    hook = new_replica_hook_;
  }
  if (hook)
    for (auto& p : added) p->on_new_replica(hook);
}

void Upstreams::on_new_replica(ReplicaPool::NewReplicaHook hook) {
  {
    std::unique_lock lock(mu_);
    new_replica_hook_ = hook;
  }
  for (auto& p : pools()) p->on_new_replica(hook);
}

std::shared_ptr<ReplicaPool> Upstreams::find(const std::string& model) const {
  std::shared_lock lock(mu_);
  auto it = pools_.find(model);
  return it == pools_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<ReplicaPool>> Upstreams::pools() const {
  std::shared_lock lock(mu_);
  std::vector<std::shared_ptr<ReplicaPool>> out;
  for (const auto& [_, p] : pools_) out.push_back(p);
  return out;
}

void Upstreams::activate(const std::string& model, const std::string& replica_id, const scaler::Endpoint& endpoint) {
  auto pool = find(model);
  if (!pool) {
    log::warn("routing.activate_unknown_model", {{"model", model}, {"replica", replica_id}});
    return;
  }
  ReplicaConfig rc;
  rc.id = replica_id;
  rc.host = endpoint.host;
  rc.port = endpoint.port;
  pool->add(rc, false);
}

void Upstreams::drain(const std::string& model, const std::string& replica_id, std::function<void()> on_drained) {
  auto pool = find(model);
  if (!pool) {
    if (on_drained) on_drained();
    return;
  }
  pool->drain(replica_id, std::move(on_drained));
}

void Upstreams::remove(const std::string& model, const std::string& replica_id) {
  if (auto pool = find(model)) pool->remove(replica_id);
}

scaler::GatewaySignals Upstreams::sample(const std::string& model) const {
  auto pool = find(model);
  return pool ? pool->sample() : scaler::GatewaySignals{};
}

}  // namespace tidegate::gateway
