#pragma once
// The scaler section's `leader_election:` mapping (called by parse_scaler_config).
#include <string>
#include <vector>

#include "tidegate/scaler/config.h"

namespace tidegate::scaler {

// `node` may be missing (kind none). Kubernetes settings left empty take the first Kubernetes
// pool actuator's (API server, token, CA, namespace). Throws ConfigError naming key and line.
LeaderElectionConfig parse_leader_election(const YAML::Node& node, const std::string& path,
                                           const std::vector<ModelPoolConfig>& pools);

}  // namespace tidegate::scaler
