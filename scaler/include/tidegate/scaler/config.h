#pragma once
// The `scaler:` section: one entry per model pool (actuator, lifecycle, signals, policy).
// Parsed once into an immutable object; bad values fail at load with key path and line.
#include <memory>
#include <string>
#include <vector>

#include "tidegate/scaler/actuators.h"
#include "tidegate/scaler/leader_election.h"
#include "tidegate/scaler/lifecycle.h"
#include "tidegate/scaler/policy.h"
#include "tidegate/scaler/sampler.h"

namespace YAML {
class Node;
}

namespace tidegate::scaler {

enum class ActuatorKind { kProcess, kKubernetes, kStatic };

struct ModelPoolConfig {
  std::string model;
  std::string replica_class;  // cost rate key (e.g. "h100"); defaults to the actuator kind
  ActuatorKind actuator = ActuatorKind::kStatic;
  ProcessActuatorConfig process;
  KubernetesActuatorConfig kubernetes;
  StaticActuatorConfig fixed;
  LifecycleConfig lifecycle;
  SamplerConfig signals;
  PolicyConfig policy;
};

struct ScalerConfig {
  double tick_s = 1.0;
  std::size_t decisions_kept = 200;  // per pool, for GET /admin/scaler
  std::vector<ModelPoolConfig> pools;
  LeaderElectionConfig leader_election;  // kind none: this gateway's scaler always acts
};

// One pool's `policy:` mapping (also used by the replay tool's config). Throws ConfigError.
PolicyConfig parse_policy_config(const YAML::Node& node, const std::string& path);

// `node` is the scaler section; `path` its key path ("scaler"). Throws ConfigError.
std::shared_ptr<const ScalerConfig> parse_scaler_config(const YAML::Node& node, const std::string& path);

}  // namespace tidegate::scaler
