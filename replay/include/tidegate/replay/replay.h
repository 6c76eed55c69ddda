#pragma once
// Virtual-time replay of a trace through a simulated fleet: arrivals -> the gateway's admission
// queue -> replicas running the shared continuous-batching timing model (tidegate_sim), with a
// ScalingPolicy deciding the fleet. Deterministic and single-threaded per run; independent runs
// may go on separate threads.
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "tidegate/replay/policy.h"
#include "tidegate/replay/trace.h"
#include "tidegate/routing/prefix_aware.h"
#include "tidegate/scaler/policy.h"
#include "tidegate/sim/timing_model.h"

namespace tidegate::replay {

// One replica: model + GPU + serving engine. Defaults documented in replay/README.md.
struct ReplicaProfile {
  std::string name = "llama-3-8b-a100-80gb";
  sim::TimingParams timing;       // tidegate_sim defaults; startup_s is set from cold_start_s
  double cold_start_s = 60;       // container start + weights load + engine warm-up
  double warm_promotion_s = 5;    // warm (loaded, unrouted) -> active
  double usd_per_gpu_hour = 1.79;
  int gpus_per_replica = 1;
  int slots_per_replica = 32;     // concurrent requests the gateway sends one replica
  // Requests in flight one replica sustains within the SLO: the "100 %" of the utilisation
  // and concurrency baselines (HPA, KPA), so they and Tidegate share a notion of capacity.
  double capacity_per_replica = 16;
  // A standby tier (at most one): a parked replica bills price_fraction of a GPU-hour and is
  // ready again promotion_s after a wake-up. None by default.
  std::vector<scaler::WarmTier> tiers;
};

struct Slo {
  double ttft_s = 1.0;
  double e2e_s = 60.0;
  double attainment = 0.99;  // the fraction of requests that must meet the TTFT objective
};

// Which replica a dispatched request goes to (the gateway's `balancer`). least_outstanding is
// the fewest in flight (ties: the first); prefix_aware is routing::choose_prefix_aware over a
// per-replica index of the block ids routed to it, the same code the gateway runs.
// kIdeal is a bound, not a router: least-outstanding placement, with every prefix the fleet has
// seen before already cached (one infinite cache shared by all replicas).
enum class Balancer { kLeastOutstanding, kRoundRobin, kPrefixAware, kIdeal };
const char* balancer_name(Balancer b);
bool parse_balancer(std::string_view text, Balancer* out);

struct ReplayOptions {
  ReplicaProfile profile;
  Balancer balancer = Balancer::kLeastOutstanding;
  routing::PrefixAwareConfig prefix_aware;
  Slo slo;
  int replicas_min = 1;
  int replicas_max = 64;
  // Active and ready at t = 0: the fleet as it was before the trace began. 0 = "auto", which
  // the caller resolves (tidegate-replay uses the cheapest static fleet); run_replay() treats
  // 0 as replicas_min.
  int initial_active = 0;
  // Decisions are computed but not applied before this: at t = 0 the replay starts with empty
  // batches, and a policy that saw only the ramp-up would shrink a fleet that live traffic
  // keeps busy.
  double warmup_s = 60;
  double sample_period_s = 1;       // observations for the policy
  double timeline_period_s = 10;    // rows of the timeline
  bool keep_requests = false;       // fill ReplayResult::requests (tests, analysis)
  // Called now and then with (virtual time done, virtual time total); may be empty.
  std::function<void(double, double)> progress;
};

struct TimelineRow {
  double t = 0;  // start of the bucket
  std::size_t arrivals = 0;
  int active = 0, starting = 0, warm = 0, draining = 0;  // at the end of the bucket
  std::size_t queue_depth = 0;                            // at the end of the bucket
  std::size_t in_flight = 0;
  double ttft_p99_s = 0;  // of first tokens within the bucket
};

enum StateIndex { kStarting = 0, kWarm, kActive, kDraining, kStandby, kStateCount };

struct ReplaySummary {
  std::string policy;
  std::size_t requests = 0;
  std::size_t completed = 0;
  std::size_t rejected = 0;  // prompt larger than a replica's KV capacity
  double duration_s = 0;     // virtual time until the last request finished
  // GPU-hour equivalents: a standby replica's hour counts as its tier's price fraction.
  std::array<double, kStateCount> gpu_hours_by_state{};
  double gpu_hours = 0;
  // Of gpu_hours, the cold starts the trace ended before they finished: a trace is a slice of
  // a stream that goes on, so what a policy started in its last cold start is billed without a
  // chance to serve. Reported apart so that a comparison can tell that edge from the policy.
  double gpu_hours_unready_at_end = 0;
  double cost_usd = 0;
  double ttft_slo_attainment = 0;
  double e2e_slo_attainment = 0;
  double ttft_p50_s = 0, ttft_p99_s = 0;
  double e2e_p50_s = 0, e2e_p99_s = 0;
  double queue_wait_p99_s = 0;
  double mean_replicas = 0;  // time-weighted, all non-stopped replicas
  int max_replicas = 0;
  std::size_t scale_events = 0;  // cold starts + promotions + drains + stops of warm replicas
  // Prefix caching over the whole fleet: prompt tokens looked up and found (not prefilled).
  std::int64_t prefix_query_tokens = 0;
  std::int64_t prefix_hit_tokens = 0;
  // Of the dispatches, those the balancer routed for a prefix match, and the blocks it expected.
  std::size_t prefix_routed = 0;
  std::int64_t prefix_expected_blocks = 0;
  // GPU-hours as a ratio to the cheapest static fleet meeting the SLO and to the offline
  // optimum, when those were computed (0 = unknown).
  double gpu_hours_vs_static = 0;
  double gpu_hours_vs_optimum = 0;
  bool meets_slo(const Slo& slo) const { return ttft_slo_attainment >= slo.attainment; }
};

struct RequestOutcome {
  double queue_wait_s = 0;
  double ttft_s = 0;  // arrival -> first token
  double e2e_s = 0;   // arrival -> last token
  bool rejected = false;
};

struct ReplayResult {
  ReplaySummary summary;
  std::vector<TimelineRow> timeline;
  std::vector<RequestOutcome> requests;  // in trace order, when keep_requests
};

ReplayResult run_replay(const Trace& trace, ScalingPolicy& policy, const ReplayOptions& options);

// Throws std::invalid_argument naming the parameter when options are absurd.
void validate(const ReplayOptions& options);

const char* state_name(StateIndex s);

}  // namespace tidegate::replay
