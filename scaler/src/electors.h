#pragma once
// The two LeaderElector engines behind make_leader_elector (private to the scaler library;
// the tests build them directly).
#include <memory>

#include "tidegate/scaler/leader_election.h"

namespace tidegate::scaler {

// Lease through the API server, on a thread of its own every retry_period. `config` must be
// resolved (resolve_lease_config).
std::unique_ptr<LeaderElector> make_kubernetes_elector(LeaderElectionConfig config);
// flock(2) on config.lock_file, tried every retry_period while a follower.
std::unique_ptr<LeaderElector> make_file_lock_elector(LeaderElectionConfig config);

}  // namespace tidegate::scaler
