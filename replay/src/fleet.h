#pragma once
// The replay's actuator: replicas and their lifecycle (starting -> warm|active -> draining ->
// stopped), GPU-time accounting by state, and the translation of a ScaleTarget into actions.
// Every policy goes through the same actuator, so they differ only in what they ask for.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tidegate/replay/policy.h"
#include "tidegate/replay/replay.h"
#include "tidegate/routing/prefix_aware.h"
#include "tidegate/sim/timing_model.h"

namespace tidegate::replay::detail {

struct Replica {
  int id = 0;
  StateIndex state = kStarting;
  bool for_warm = false;   // a cold start that lands in the warm pool
  bool promoting = false;  // warm -> active in progress (billed as starting)
  bool waking = false;     // standby -> warm in progress (not ready yet)
  bool woken = false;      // woke from standby: its wake-up included the health check, routing is immediate
  double ready_at = 0;
  double state_since = 0;
  int in_flight = 0;
  std::unique_ptr<sim::TimingModel> engine;
  // What the router believes this replica's prefix cache holds (a new replica: nothing).
  routing::PrefixIndex routed_prefixes{0};
  // Set by an external lifecycle controller's drain(): called once in_flight reaches zero;
  // the replica then waits (still draining) for the controller to remove or stop it.
  std::function<void()> on_drained;
};

class Fleet final {
 public:
  // `prefix_block_tokens`: the trace's KV block size (0: it carries no block ids).
  Fleet(const ReplayOptions& options, std::int32_t prefix_block_tokens);

  // Replicas that are active and loaded at t (the fleet before the trace starts).
  void add_ready(int n, double t);
  void apply(ScaleTarget target, double t);
  // Completes cold starts and promotions due by t.
  void complete_transitions(double t);
  double next_transition() const;
  // A draining replica with nothing in flight stops.
  void retire_idle_draining(double t);
  // Closes the books at t (all replicas stop).
  void close(double t);
  // GPU-seconds of the cold starts still in progress when the books closed: capacity paid for
  // that the trace ended before it could serve (part of gpu_seconds()[kStarting]).
  double unready_at_close_s() const { return unready_at_close_s_; }

  // Primitives for an external lifecycle controller (scaler::PoolController through
  // VirtualPool): every replica it starts lands warm (loaded, unrouted) until activated.
  Replica& start(double t) { return start_cold(t, true); }
  Replica* find(int id);
  void stop_id(int id, double t);
  void activate(Replica& r, double t);  // warm -> routed after warm_promotion_s
  void drain(Replica& r, double t, std::function<void()> on_drained);
  void unroute(Replica& r, double t);   // drained and removed from routing: idle, loaded (warm)
  bool park(Replica& r, double t);      // warm -> standby (the profile's tier)
  bool wake(Replica& r, double t);      // standby -> ready again after the tier's promotion

  std::vector<std::unique_ptr<Replica>>& replicas() { return replicas_; }
  const std::vector<std::unique_ptr<Replica>>& replicas() const { return replicas_; }
  int count(StateIndex s) const;
  int starting_for_active() const;
  int promoting() const;
  std::size_t scale_events() const { return scale_events_; }
  int max_replicas() const { return max_replicas_; }
  const std::array<double, kStateCount>& gpu_seconds() const { return gpu_seconds_; }
  // Prefix-cache tokens over every replica, stopped ones included.
  sim::PrefixCacheStats prefix_cache_totals() const;

 private:
  Replica& start_cold(double t, bool for_warm);
  void set_state(Replica& r, StateIndex s, double t);
  void stop(std::size_t index, double t);

  const ReplayOptions& opt_;
  sim::TimingParams params_;
  std::size_t index_blocks_ = 0;  // of each replica's router index (router_index_blocks)
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::array<double, kStateCount> gpu_seconds_{};
  double unready_at_close_s_ = 0;
  sim::PrefixCacheStats stopped_prefix_{};  // of replicas already stopped
  std::size_t scale_events_ = 0;
  int next_id_ = 0;
  int max_replicas_ = 0;
};

}  // namespace tidegate::replay::detail
