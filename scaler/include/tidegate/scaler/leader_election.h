#pragma once
// Leader election for the scaler: with N gateways, one Scaler actuates and the others follow.
// One lease per gateway deployment (every pool of a Scaler shares it): the gateways of one
// deployment run one scaler config, so one elected scaler acts for all its pools, and one lease
// keeps the API writes to one per retry period.
//
// Two engines: a coordination.k8s.io/v1 Lease (holderIdentity, leaseDurationSeconds,
// acquireTime, renewTime, leaseTransitions, written with the read metadata.resourceVersion so a
// 409 means another candidate won), or an flock(2)-held lock file for process actuators on
// one host (the holder is the leader; the kernel releases the lock when the process dies).
//
// The decision part is the pure LeaseMachine below; the I/O (the API client, the thread) lives
// in src/. Fencing: a leader whose last successful renewal was sent more than renew_deadline
// ago stops actuating; others can take the lease only lease_duration after they saw that
// renewal, and renew_deadline < lease_duration, so two leaders never actuate at once (the
// margin must cover one actuator call and clock-rate drift).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace tidegate::scaler {

enum class ElectionKind { kNone, kKubernetes, kFile };

struct LeaderElectionConfig {
  ElectionKind kind = ElectionKind::kNone;
  std::string lease_name = "tidegate-scaler";
  std::string identity;  // empty: <hostname>_<pid> (the pod name is the hostname in Kubernetes)
  double lease_duration_s = 15;
  double renew_deadline_s = 10;
  double retry_period_s = 2;
  // kubernetes: empty fields take the first Kubernetes pool actuator's, then in-cluster defaults.
  std::string api_server;
  std::string ns;
  std::string token;
  std::string token_file;
  std::string ca_file;
  std::string namespace_file;
  bool insecure_skip_tls_verify = false;
  double request_timeout_s = 2;
  // file: the lock file (created if missing).
  std::string lock_file;
};

// What a Lease says, as read from (or to be written to) the API server.
struct LeaseRecord {
  std::string holder;          // spec.holderIdentity; empty = released
  int lease_duration_s = 0;    // spec.leaseDurationSeconds
  std::string acquire_time;    // spec.acquireTime (MicroTime, RFC 3339 with microseconds)
  std::string renew_time;      // spec.renewTime
  int transitions = 0;         // spec.leaseTransitions
  std::string resource_version;  // metadata.resourceVersion: the precondition of the next update
};

enum class LeaseAction {
  kCreate,    // no Lease yet: create it naming us (a 409 AlreadyExists means another won)
  kAcquire,   // update it to name us (free, released, or expired as we observed it)
  kRenew,     // we hold it: update renewTime
  kStandBy,   // another holds it and it has not expired
};

struct ElectionStatus {
  bool leader = false;           // we hold the lease (renewals may be failing)
  bool may_actuate = false;      // leader and renewed within renew_deadline
  std::string holder;            // last observed holder ("" unknown or released)
  std::uint64_t transitions = 0; // our leader/follower changes since start
  std::string last_error;
};

// The pure election logic over (observed lease, local monotonic time). Expiry is measured on
// the candidate's own clock from when it first saw the current record (not from the holder's
// renewTime), so clock skew between hosts does not matter, only clock rates.
class LeaseMachine final {
 public:
  LeaseMachine(std::string identity, double lease_duration_s, double renew_deadline_s);

  // What to do after a read: `observed` is nullopt when the Lease does not exist (404).
  LeaseAction next(const std::optional<LeaseRecord>& observed, double now);
  // The record to write for `action` (kCreate/kAcquire/kRenew), given the read one.
  LeaseRecord proposal(LeaseAction action, const std::optional<LeaseRecord>& observed,
                       const std::string& micro_time_now) const;

  // Outcome of the write for kCreate/kAcquire/kRenew. `sent_at` is when the request was sent:
  // the fence counts from there, as others count from when they see it, which is later.
  void written(const LeaseRecord& stored, double sent_at);
  // 409 (someone else wrote first): we are not the holder, whatever we were.
  void conflicted(double now);
  // Transport error, timeout or 5xx: nothing known; a leader stays leader until the fence.
  void failed(double now);
  // Graceful release sent (holder cleared): we stop at once.
  void released();

  // Leader and last renewal sent less than renew_deadline ago. Checked before every actuation.
  bool may_actuate(double now) const;
  // Leader in name past the fence: step down (counts a transition). Returns true if it did.
  bool step_down_if_fenced(double now);

  bool leader() const { return leader_; }
  const std::string& holder() const { return holder_; }
  std::uint64_t transitions() const { return transitions_; }
  const std::string& identity() const { return identity_; }

 private:
  void become(bool leader);

  std::string identity_;
  double lease_duration_s_;
  double renew_deadline_s_;
  bool leader_ = false;
  double renewed_at_ = 0;     // local time the last successful write was sent
  std::string holder_;        // last observed holder
  std::string seen_version_;  // resourceVersion of the record being timed
  double seen_at_ = 0;        // local time that record was first observed
  std::uint64_t transitions_ = 0;
};

// A running election (a thread of its own, or the kernel's lock): the Scaler asks it before
// every actuation and shows its status.
class LeaderElector {
 public:
  virtual ~LeaderElector() = default;
  virtual void start() = 0;
  // Stops trying; a leader releases (Lease holder cleared / lock closed) after it stops actuating.
  virtual void stop() = 0;
  virtual bool may_actuate() const = 0;
  virtual ElectionStatus status() const = 0;
  virtual std::string identity() const = 0;
};

// Builds the configured elector; nullptr for kind none. Throws std::invalid_argument on a
// setting that cannot work (no API server, no lock file).
std::unique_ptr<LeaderElector> make_leader_elector(const LeaderElectionConfig& config);

// <hostname>_<pid>: unique per process on a host, and the pod name in Kubernetes.
std::string default_identity();

// RFC 3339 with microseconds, UTC ("2026-12-03T13:46:02.123456Z"): the Lease's MicroTime.
std::string micro_time(double unix_s);

}  // namespace tidegate::scaler
