#pragma once
// The attribution engine: pure bookkeeping on an explicit clock, no locks, no metrics.
//
// Every event on a replica (state change, request start/progress/finish, advance) closes the
// replica's open interval as a segment priced at the rate of its state. A segment with requests
// in flight is shared among them by their token work inside it; a segment without requests is
// idle (active replica) or standby (starting, warm, draining). The state only picks the price:
// who pays depends on whether requests were in flight, so a scaler and a gateway reporting in
// slightly different orders cannot lose money.
//
// Work inside a segment is known once every member has reported cumulative progress at or
// after the segment's end (work between two reports is spread uniformly over that time). Such
// segments settle exactly. When a request finishes, every pending segment it belongs to is
// settled at once, so its cost is final; members that have not reported yet are estimated with
// their last observed work rate, else the model's recent rate, else the mean of the others. An
// estimate only moves money between the members of one segment, never out of it, so
// conservation is exact whatever the estimate. Pending segments are capped per replica.
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tidegate/common/replica_state.h"
#include "tidegate/cost/config.h"

namespace tidegate::cost {

class AccrualSink {
 public:
  virtual ~AccrualSink() = default;
  // The bill: replica time at its state's price. `busy`: requests were in flight.
  virtual void on_bill(const std::string& model, const std::string& cls, ReplicaState state, bool busy, double t0,
                       double t1, double usd) = 0;
  // Replica time nobody used: idle (active, empty) or standby (starting, warm, draining, empty).
  virtual void on_overhead(const std::string& model, bool idle, double t0, double t1, double usd) = 0;
  // A request's share of one segment.
  virtual void on_share(std::uint64_t handle, double t0, double t1, double usd) = 0;
};

struct LedgerStats {
  std::uint64_t clock_regressions = 0;   // events with t before the replica's last event (clamped)
  std::uint64_t progress_regressions = 0;  // cumulative counts that went down (ignored)
  std::uint64_t estimated_members = 0;   // segment members settled with an estimated work
  std::uint64_t capped_settlements = 0;  // segments settled early because too many were pending
  double pending_usd = 0;                // cost in segments not settled yet
};

class Ledger final {
 public:
  static constexpr std::size_t kMaxPending = 512;

  explicit Ledger(AccrualSink& sink) : sink_(sink) {}

  bool has_replica(const std::string& id) const { return replicas_.count(id) != 0; }
  ReplicaState state_of(const std::string& id) const;
  // Creates the replica on first sight. Returns the previous state (kStopped when new).
  ReplicaState set_state(const std::string& id, const std::string& model, const std::string& cls,
                         const StateRates& rates, ReplicaState state, double t);
  // False when the replica is unknown (the request then has no replica cost).
  bool start(std::uint64_t handle, const std::string& replica_id, double t);
  void progress(std::uint64_t handle, double cumulative_work, double t);
  // Settles everything the request took part in; returns its final cost.
  double finish(std::uint64_t handle, double t);
  // Closes every replica's open interval at t (metrics and dashboards stay current).
  void advance(double t);

  const LedgerStats& stats() const { return stats_; }
  std::size_t pending_segments() const;
  std::size_t requests_in_flight() const { return requests_.size(); }

 private:
  struct Member {
    std::uint64_t handle;
    double work;  // < 0: not known yet
  };
  struct Segment {
    double t0, t1, usd;
    std::vector<Member> members;
    std::size_t unknown = 0;  // members whose work is not known yet
  };
  struct Replica {
    std::string model, cls;
    StateRates rates{};
    ReplicaState state = ReplicaState::kStopped;
    double t_last = 0;
    std::vector<std::uint64_t> in_flight;
    std::deque<Segment> pending;
  };
  struct Request {
    std::string replica_id;
    double t_start = 0;
    double last_t = 0;     // time of the last report (or the start)
    double last_work = 0;  // cumulative weighted work already spread over segments
    double reported = 0;   // latest cumulative weighted work reported
    double rate = -1;      // work per second over the last report interval; < 0 unknown
    double cost = 0;
  };
  struct ModelRate {
    double work_per_s = -1;
  };

  double close(Replica& r, double t);
  void settle(Segment& s, const std::string& model);
  void settle_complete(Replica& r);
  void enforce_cap(Replica& r);
  void spread_reported(Request& q, std::uint64_t handle, Replica& r, double t);

  AccrualSink& sink_;
  std::unordered_map<std::string, Replica> replicas_;
  std::unordered_map<std::uint64_t, Request> requests_;
  std::unordered_map<std::string, ModelRate> model_rates_;
  LedgerStats stats_;
};

}  // namespace tidegate::cost
