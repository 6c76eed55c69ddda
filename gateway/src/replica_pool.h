#pragma once
// One model's live set of replicas: balancing, per-replica concurrency caps, the admission
// queue, health (active probes + passive ejection) and drain. Thread-safe; callbacks run
// with the lock released, on the calling thread (callers post to their own executor).
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "admission_queue.h"
#include "balancer.h"
#include "replica_address.h"
#include "tidegate/gateway/config.h"
#include "tidegate/routing/prefix_aware.h"
#include "tidegate/scaler/routing.h"

namespace tidegate::gateway {

enum class ReplicaHealth { kUnknown, kHealthy, kEjected };

// Identity and address are fixed; load and health live in the pool under its mutex.
struct Replica {
  std::string id;
  std::string host;
  std::uint16_t port = 0;
  std::string authority;      // "host:port": the Host of every request sent to it, made once
  double weight = 1.0;
  std::string replica_class;
  std::string api_key;        // upstream Authorization; empty: the model's replica_api_key
  bool from_config = false;   // config reloads only touch these; the scaler owns the rest
  std::uint64_t serial = 0;   // unique per process: keys connection pools across re-adds
  ResolvedAddress address;    // host:port looked up off the event loop, kept until a connect fails
  // Guarded by the owning pool's mutex.
  int outstanding = 0;
  int consecutive_failures = 0;
  ReplicaHealth health = ReplicaHealth::kUnknown;
  bool draining = false;
  bool removed = false;
  std::function<void()> on_drained;
  // balancer: prefix_aware: the prompt blocks routed here (emptied when the replica is
  // ejected: it may come back restarted, its cache empty).
  routing::PrefixIndex prefixes{0};
};
using ReplicaPtr = std::shared_ptr<Replica>;

// What a request brings for prefix-aware routing and affinity, and what the choice was (for
// the access log). Written by the pool under its lock before the grant is posted.
struct RouteHint {
  std::vector<std::uint64_t> blocks;  // routing::prompt_blocks of the prompt
  std::uint64_t session = 0;          // hash of the session key; 0 = none
  // The choice: "prefix", "least_loaded", "bounded", "affinity" (empty: another balancer).
  std::string_view reason;
  std::size_t matched_blocks = 0;
  // What the choice taught the chosen replica's entries (for other gateways: RoutePlacement):
  // blocks it did not hold yet, a session not pinned to it before.
  bool new_blocks = false;
  bool new_pin = false;
};

enum class Outcome { kSuccess, kFailure, kNeutral };

class ReplicaPool final : public std::enable_shared_from_this<ReplicaPool> {
 public:
  // Called once when a queued request gets a slot (replica set) or must give up (null).
  using Grant = std::function<void(ReplicaPtr)>;
  enum class Status { kGranted, kQueued, kQueueFull, kNoReplica };
  struct Acquired {
    Status status = Status::kNoReplica;
    ReplicaPtr replica;
    std::uint64_t ticket = 0;
  };

  explicit ReplicaPool(const ModelConfig& config, std::uint64_t seed = 0);
  void update_config(const ModelConfig& config);

  // A slot now, a place in the queue (on_grant fires later), or a refusal.
  // `hint` (may be null) is read and written under the pool's lock, also when the request is
  // granted later from the queue.
  Acquired acquire(Grant on_grant, std::shared_ptr<RouteHint> hint = nullptr);
  // Retries: a slot now on a replica not in `exclude`, never queued.
  ReplicaPtr try_acquire(std::span<const std::uint64_t> exclude, RouteHint* hint = nullptr);
  // True when the ticket was still queued (no grant will come).
  bool cancel(std::uint64_t ticket);
  void release(const ReplicaPtr& replica, Outcome outcome);
  // A failure found out after the replica's slot was released (a second replica served the
  // request the first one refused).
  void blame(const ReplicaPtr& replica);

  // Live-set changes (scaler, config reload). add() of a known id updates it in place.
  void add(const ReplicaConfig& r, bool from_config);
  // Called (outside the lock) with each replica added from now on, and at once with every
  // replica already here: the gateway looks its address up then, off the event loop.
  using NewReplicaHook = std::function<void(const ReplicaPtr&)>;
  void on_new_replica(NewReplicaHook hook);
  void drain(const std::string& id, std::function<void()> on_drained);
  void remove(const std::string& id);
  void report_probe(const std::string& id, bool ok);
  // Another gateway routed these blocks / pinned this session to replica `id` (issue 22).
  // False when the replica is not known here or nothing applies to this pool.
  bool learn(const std::string& id, std::span<const std::uint64_t> blocks, std::uint64_t session);

  std::vector<ReplicaPtr> replicas() const;  // snapshot, for probes
  scaler::GatewaySignals sample() const;

  // Demand for the scaler's work model: lock-free counters, a few relaxed increments a request.
  void note_arrival(std::uint64_t estimated_prompt_tokens);
  void note_queued(std::int64_t estimated_prompt_tokens);  // + entering the queue, - leaving it
  // A first token (stream) `seconds` after the request was read; a turned-away request is a
  // first token never received (seconds < 0).
  void note_first_token(double seconds);
  bool ready() const;  // some replica is healthy and routable
  struct StateCounts { int healthy = 0, unknown = 0, ejected = 0, draining = 0; };
  StateCounts state_counts() const;
  std::size_t queue_depth() const;
  const std::string& model() const { return model_; }
  HealthConfig health_config() const;

 private:
  bool routable(const Replica& r) const;
  ReplicaPtr pick_locked(std::span<const std::uint64_t> exclude = {}, RouteHint* hint = nullptr);
  int pick_prefix_aware_locked(RouteHint& hint);
  void forget_locked(Replica& r);
  std::size_t index_blocks() const;  // per replica, 0 unless balancer: prefix_aware  // its prefixes and sessions: it may come back empty
  // Hands freed capacity to queued waiters; returns the grants to run unlocked.
  void dispatch_locked(std::vector<std::pair<Grant, ReplicaPtr>>& grants);
  void apply_outcome_locked(Replica& replica, Outcome outcome);
  void run(std::vector<std::pair<Grant, ReplicaPtr>>& grants, std::vector<std::function<void()>>& drained);
  bool any_routable_locked() const;

  const std::string model_;
  mutable std::mutex mu_;
  NewReplicaHook new_replica_hook_;  // guarded by mu_; called outside it
  ModelConfig config_;
  std::vector<ReplicaPtr> replicas_;
  struct Waiter {
    Grant grant;
    std::shared_ptr<RouteHint> hint;
  };
  AdmissionQueue<Waiter> queue_;
  Balancer balancer_;
  routing::SessionTable sessions_{0};
  // pick_locked's scratch, kept between picks so that choosing a replica allocates nothing
  // (matched_blocks filled only for prefix_aware).
  std::vector<Candidate> candidates_;
  std::vector<std::size_t> candidate_index_;

  std::atomic<std::uint64_t> arrivals_{0}, arrival_tokens_{0}, ttft_n_{0};
  std::atomic<std::int64_t> queued_tokens_{0};
  std::array<std::atomic<std::uint64_t>, 24> prompt_sizes_{};
  std::array<std::atomic<std::uint64_t>, scaler::kTtftBounds.size()> ttft_in_{};  // per bucket, not cumulative
};

}  // namespace tidegate::gateway
