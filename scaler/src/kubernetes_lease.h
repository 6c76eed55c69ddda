#pragma once
// coordination.k8s.io/v1 Lease calls for the elector: GET, POST (create) and PUT (update with
// the read resourceVersion). One attempt per call with a deadline: the elector's own period is
// the retry, and a renewal that waits out backoffs would only reach the fence later.
#include <optional>
#include <string>

#include "tidegate/scaler/leader_election.h"

namespace tidegate::scaler {

struct LeaseCall {
  enum class Outcome { kOk, kNotFound, kConflict, kError } outcome = Outcome::kError;
  std::optional<LeaseRecord> record;  // kOk: the stored (or read) record
  std::string error;                  // kError / kConflict: what the server or transport said
};

class KubernetesLeaseClient final {
 public:
  // `config` must have api_server and ns filled (resolve_lease_config does).
  explicit KubernetesLeaseClient(LeaderElectionConfig config);
  LeaseCall get();
  LeaseCall create(const LeaseRecord& r);
  LeaseCall update(const LeaseRecord& r);  // r.resource_version is the precondition
  // Clears the holder (leaseDurationSeconds 1) so a successor need not wait out the lease.
  LeaseCall release(const LeaseRecord& observed, const std::string& micro_time_now);

 private:
  LeaseCall send(const std::string& method, const std::string& path, const std::string& body);
  std::string collection() const;

  LeaderElectionConfig config_;
};

// Fills the in-cluster defaults: API server from KUBERNETES_SERVICE_HOST/PORT, namespace from
// namespace_file, "default" last. Throws std::invalid_argument without an API server.
LeaderElectionConfig resolve_lease_config(LeaderElectionConfig c);

// Lease JSON <-> record (exposed for the tests).
std::string lease_json(const LeaderElectionConfig& c, const LeaseRecord& r);
std::optional<LeaseRecord> parse_lease(const std::string& body);

}  // namespace tidegate::scaler
