#pragma once
// The live scaler's lifecycle controller (scaler::PoolController) driving the simulated fleet:
// this is its Actuator (start/stop/observe) and its RoutingTarget (activate/drain/remove), so
// the warm pool, promotions, demotions and drains follow the live code, not the replay's rules.
#include <string>
#include <vector>

#include "fleet.h"
#include "tidegate/scaler/actuator.h"
#include "tidegate/scaler/routing.h"

namespace tidegate::replay::detail {

class VirtualPool final : public scaler::Actuator, public scaler::RoutingTarget {
 public:
  explicit VirtualPool(Fleet& fleet) : fleet_(fleet) {}
  void set_now(double t) { now_ = t; }
  // After each controller step. The controller adopts replicas it finds as warm (unrouted)
  // and activates what it needs; the initial fleet is routed, so after the first step the
  // replicas it did not activate are unrouted here too (drained first if busy).
  void after_step();

  std::string_view kind() const override { return "replay"; }
  bool elastic() const override { return true; }
  bool start(bool for_warm_pool) override;
  void stop(const std::string& id) override;
  scaler::PoolObservation observe() override;
  scaler::ActuatorStats stats() const override { return {}; }
  bool park(const std::string& id) override;
  bool unpark(const std::string& id) override;

  void activate(const std::string& model, const std::string& replica_id, const scaler::Endpoint& endpoint) override;
  void drain(const std::string& model, const std::string& replica_id, std::function<void()> on_drained) override;
  void remove(const std::string& model, const std::string& replica_id) override;

 private:
  Replica* find(const std::string& id);
  Fleet& fleet_;
  double now_ = 0;
  bool adopted_ = false;
  bool snapshot_taken_ = false;
  std::vector<int> initial_;  // routed replicas the controller has not activated yet
};

}  // namespace tidegate::replay::detail
