#pragma once
// The replica lifecycle shared by the gateway (routing), the scaler (decisions) and cost
// accounting (which rate applies). starting -> warm -> active -> draining -> stopped; a warm
// replica may be parked in standby (an engine asleep, its GPU memory released) and woken
// (standby -> starting -> warm).
#include <optional>
#include <string_view>

namespace tidegate {

enum class ReplicaState { kStarting, kWarm, kActive, kDraining, kStopped, kStandby };
inline constexpr int kReplicaStateCount = 6;

constexpr std::string_view to_string(ReplicaState s) {
  switch (s) {
    case ReplicaState::kStarting: return "starting";
    case ReplicaState::kWarm: return "warm";
    case ReplicaState::kActive: return "active";
    case ReplicaState::kDraining: return "draining";
    case ReplicaState::kStopped: return "stopped";
    case ReplicaState::kStandby: return "standby";
  }
  return "unknown";
}

inline std::optional<ReplicaState> replica_state_from_string(std::string_view s) {
  for (auto st : {ReplicaState::kStarting, ReplicaState::kWarm, ReplicaState::kActive, ReplicaState::kDraining,
                  ReplicaState::kStopped, ReplicaState::kStandby})
    if (to_string(st) == s) return st;
  return std::nullopt;
}

}  // namespace tidegate
