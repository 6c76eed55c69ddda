#pragma once
// The scaling policy: a pure function of signals and time. No sockets, clocks or threads,
// so the live scaler and the trace-replay tool (virtual time) run the very same code.
//
// Two ways of measuring demand, combined by taking the larger:
//   * the work model (default): prompt tokens arriving, priced by a replica's prefill cost,
//     sized for the TTFT SLO with a queueing bound, plus KV occupancy and in-flight slots;
//     on top of it a burst memory (capacity is not released while the demand's recent swings
//     could outrun a cold start), a closed loop on measured TTFT attainment, and a hold
//     before releasing capacity as long as a cold start costs;
//   * target tracking over plain signals (`targets`, Knative KPA style): stable and panic
//     windows, HPA-style scale-down stabilisation. Off by default; kept for users who scale
//     on concurrency, queue depth, GPU utilisation or KV usage.
// Warm tiers (cheaper standby states with their own promotion time) are sized by the same
// plan. Every decision carries a bounded reason code and a sentence with the numbers.
#include <array>
#include <cmath>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tidegate/scaler/routing.h"

namespace tidegate::scaler {

// Targets per signal; a signal without a target is ignored.
struct SignalTargets {
  std::optional<double> concurrency_per_replica;  // requests in flight + queued, per replica
  std::optional<double> queue_per_replica;        // requests waiting, per replica
  std::optional<double> gpu_util;                 // mean over active replicas, fraction 0..1
  std::optional<double> kv_usage;                 // mean KV-cache usage, fraction 0..1
};

// A floor for known peaks. Times are seconds since midnight UTC; from > to wraps midnight.
struct ScheduledMinimum {
  unsigned days_mask = 0x7f;  // bit 0 = Sunday ... bit 6 = Saturday
  double from_s = 0;
  double to_s = 0;
  int min_replicas = 0;
};

// What one replica can do: the unit the work model counts demand in. Defaults: Llama-3.1-8B
// BF16 on one A100-80GB under vLLM (derivations in scaler/README.md); set them from a
// benchmark of your own replica.
struct ReplicaCapacity {
  double prefill_tokens_per_s = 10000;      // prompt tokens a saturated replica prefills per second
  double attention_context_tokens = 30600;  // model constant: attention doubles a token's cost here; 0 = ignore
  double step_s = 0.215;                    // one saturated step (budget / rate + decode): a request waits for it
  double overhead = 0.10;                   // share of a saturated replica's time that is not prefill (decode)
  std::optional<double> kv_tokens = 400000; // KV capacity per replica; nullopt = KV not considered
  double kv_target = 0.9;                   // occupancy at which a replica counts as full
  std::optional<double> max_in_flight;      // the gateway's per-replica cap; nullopt = not considered
  double in_flight_target = 0.9;            // share of those slots to plan for
};

struct SloTarget {
  double ttft_s = 1.0;
  double attainment = 0.99;  // share of requests whose TTFT must be within ttft_s
  double window_s = 3600;    // measured attainment is taken over this window (SLOs are long-run)
};

// A standby state cheaper than running (e.g. an engine asleep, weights in host memory).
struct WarmTier {
  std::string name;
  double price_fraction = 1.0;  // of an active replica's price
  double promotion_s = 5;       // to active
};

struct PolicyConfig {
  int min_replicas = 1;
  int max_replicas = 8;
  bool scale_to_zero = false;  // required for min_replicas == 0

  // ---- work model ----------------------------------------------------------------------
  bool work_model = true;
  double headroom = 1.0;            // multiplies the measured demand: the operator's safety factor
  ReplicaCapacity capacity;
  SloTarget slo;
  double cold_start_s = 60;         // used when the input does not carry a measured one
  double demand_window_s = 60;      // arrival rates are averaged over this ...
  double demand_short_window_s = 10;  // ... or this, when it is significantly higher
  double burst_memory_s = 7200;     // demand swings are remembered this long (twice the SLO window: README)
  double noise_z = 3;               // swings within z standard errors of noise are not bursts
  double learn_s = 0;               // hold the starting capacity in full this long; 0 = half the burst memory
  bool hold_starting_fleet = true;  // the starting fleet counts as a possible burst (learn, then fade)
  bool quiet_gaps = true;           // release the fleet in gaps the bursts' timing says are quiet
  double predictive_period_s = 0;   // > 0: a floor from the demand one period ago (daily peaks)
  double headroom_gain = 0.5;       // SLO loop: extra demand per unit of miss-budget overrun
  double max_headroom = 1.5;        // ... at most this multiple of the measured demand
  bool slo_loop_spends_budget = true;  // ... and lets queueing spend the miss budget measured unused
  std::vector<WarmTier> tiers;      // standby tiers the plan may use (dominated ones are ignored)

  // ---- target tracking -----------------------------------------------------------------
  SignalTargets targets;
  double stable_window_s = 60;
  double panic_window_s = 6;
  double panic_threshold = 2.0;  // panic-window demand / capacity
  double tolerance = 0.1;        // |value/target - 1| within this: no change for that signal

  // ---- both ----------------------------------------------------------------------------
  // Highest recommendation of this window wins before capacity is released. Unset: as long
  // as a cold start (releasing capacity needed again sooner costs more than keeping it).
  std::optional<double> scale_down_stabilization_s;
  double scale_up_max_rate = 10;   // desired <= max(max(capacity, 1) * rate, capacity + 1)
  int scale_up_max_step = 0;       // replicas per decision; 0 = unlimited
  double scale_down_max_rate = 2;  // desired >= floor(active / rate)
  int scale_down_max_step = 0;     // replicas per decision; 0 = unlimited
  std::vector<ScheduledMinimum> schedule;
};

// Observed demand for one model pool, fleet totals. nullopt = not available this tick.
struct Signals {
  std::optional<double> concurrency;  // total requests in flight + waiting
  std::optional<double> queue;        // total requests waiting
  std::optional<double> gpu_util;     // mean over active replicas, 0..1
  std::optional<double> kv_usage;     // mean over active replicas, 0..1
  // Work signals, for the interval since the previous sample.
  std::optional<double> arrivals;               // requests that arrived
  std::optional<double> arrival_prompt_tokens;  // their prompt tokens (estimated at the gateway)
  // Their prompt sizes as counts per power-of-two bucket (PromptSizes::bucket_of), for the
  // spread of service times; what a Prometheus histogram of prompt tokens gives.
  std::optional<std::array<double, 24>> arrival_prompt_sizes;
  std::optional<double> prefix_hit_ratio;       // engines: cached / queried prompt tokens, recent
  std::optional<double> prefill_backlog_tokens; // prompt tokens waiting (gateway queue + engines)
  std::optional<double> kv_used_tokens;         // KV held by running requests, all replicas
  std::optional<double> in_flight;              // requests on replicas
  std::optional<double> ttft_met;               // first tokens within the SLO ...
  std::optional<double> ttft_total;             // ... out of this many
};

struct PolicyInput {
  double t = 0;                          // seconds on any clock; non-decreasing between calls
  std::optional<double> time_of_day_s;   // UTC seconds since midnight (for schedule)
  int weekday = -1;                      // 0 = Sunday; -1 = unknown (schedule then ignores days)
  Signals signals;
  int active = 0;    // routed replicas
  int starting = 0;  // replicas on the way (loading) that will add capacity
  int warm = 0;      // ready, not routed (informational)
  std::optional<double> cold_start_s;  // measured time from start to ready, when known
  // Another scaler decides this fleet (a follower under leader election): the fleet seen
  // (active, warm) is that leader's decision, so the scale-down window records it as a
  // recommendation too. On taking over, this scaler then releases nothing the leader held within
  // the window; its own history saw only its own gateway's share of the traffic.
  bool decided_elsewhere = false;
};

enum class Direction { kUp, kDown, kHold };
constexpr std::string_view to_string(Direction d) {
  return d == Direction::kUp ? "up" : d == Direction::kDown ? "down" : "hold";
}

struct SignalRecommendation {
  std::string signal;  // "concurrency", "queue", "gpu_util", "kv_usage", "prefill", "kv_tokens", "in_flight"
  double stable_value = 0;
  double panic_value = 0;
  double target = 0;
  int stable_desired = 0;
  int panic_desired = 0;
  bool within_tolerance = false;
};

// Bounded reason codes (used as a metric label); `reason` carries the numbers.
inline constexpr std::string_view kReasonCodes[] = {
    "target_tracking", "within_tolerance", "panic",        "from_zero",       "stabilised",
    "rate_limited",    "min_replicas",     "max_replicas", "scheduled_min",   "no_signals",
    "starting_covers", "work_demand",      "burst_memory", "slo_feedback",    "learning",
    "predictive",      "signal_lost",     "burst_ends_first", "slo_met",   "quiet_gap",
};

// What the work model saw and planned, for explanations and the admin API.
struct WorkView {
  double demand = 0;        // offered prefill load now, in replicas (after SLO headroom)
  double service_s = 0;     // mean prefill time of a request
  double service_cv2 = 1;   // its squared coefficient of variation (1 = exponential)
  double burst_margin = 0;  // extra load a swing within a cold start could bring, in replicas
  double peak = 0;          // highest load remembered
  double headroom = 1;      // SLO loop multiplier
  double queueing_budget = 0;  // share of requests the queueing bound may let miss the TTFT
  std::optional<double> attainment;  // measured over slo.window_s
  int for_demand = 0;       // replicas for the load now
  int for_plan = 0;         // replicas the plan holds (active + tiers)
};

struct Decision {
  double t = 0;
  int active = 0;
  int starting = 0;
  int desired = 0;  // desired active replicas
  std::vector<int> desired_tiers;  // per PolicyConfig::tiers: replicas to keep in that tier
  Direction direction = Direction::kHold;
  bool panic = false;
  std::string reason_code;
  std::string reason;
  std::vector<SignalRecommendation> signals;
  Signals inputs;
  std::optional<WorkView> work;
};

// Carried between calls by the caller (one per model pool). Starts empty.
struct PolicyState {
  // Target tracking.
  std::deque<std::pair<double, Signals>> samples;      // within the stable window
  bool panicking = false;
  double last_panic_t = 0;
  int panic_desired = 0;  // high-water mark while panicking
  // Both: the stabilisation window's recommendations (active, and active + tiers).
  std::deque<std::pair<double, int>> recommendations;
  std::deque<std::pair<double, int>> plan_recommendations;
  // Work model.
  struct WorkSample {
    double t = 0, dt = 0, arrivals = 0, tokens = 0;
    std::optional<double> hit_ratio;
    // For the time a request holds a slot (Little's law): requests on replicas x dt, and the
    // requests that got their first token; both 0 unless both signals came with the sample.
    double in_flight_s = 0, admitted = 0;
  };
  std::deque<WorkSample> work;  // within demand_window_s
  struct LoadSample {
    double t = 0;      // bucket start
    double load = 0;   // mean offered load, in replicas
    double noise = 0;  // its standard error (few arrivals, or a short window, make it large)
  };
  std::deque<LoadSample> history;  // over the burst memory
  double bucket_start = -1, bucket_sum = 0, bucket_var = 0;
  int bucket_n = 0;
  std::deque<std::pair<double, std::pair<double, double>>> ttft;  // (t, (met, total)) within slo.window_s
  std::deque<std::pair<double, int>> held;  // (t, active replicas) within demand_window_s
  // Fleets measured short of the SLO over a demand window (the fewest active while its misses
  // came), with when: (t, fleet), within the burst memory.
  std::deque<std::pair<double, int>> short_fleets;
  // Replicas the requests' KV or in-flight slots filled (up to those active), within the burst
  // memory: a running maximum (each entry larger than every later one), so the front is the
  // largest and `bound` names what filled them (a string literal).
  struct HardNeed {
    double t = 0;
    int replicas = 0;
    const char* bound = "";
  };
  std::deque<HardNeed> hard_needs;
  // Bursts one at a time (runs of the history above its burst level): the one under way, from
  // its start to a demand window after it ends (its last first tokens), with the fewest replicas
  // active in it and its first tokens (met, total); and the fleet that last served the largest
  // burst the memory holds within the SLO, with when that burst ended (and when the last one did);
  // and the largest fleet a burst was measured short with beyond chance. Both are kept while
  // bursts go on.
  double burst_start_t = -1, burst_below_since = -1, burst_end_t = -1;
  int burst_fewest = 0;
  double burst_met = 0, burst_total = 0;
  double served_t = -1;
  int served_fleet = 0;
  int burst_short_fleet = 0;
  std::deque<std::pair<double, double>> bursts;  // (end, first tokens) of those within the memory
  // (start, fell below its level) of the same bursts: the gaps between them time the next one.
  std::deque<std::pair<double, double>> burst_spans;
  // Released in a gap the bursts' timing says is quiet (quiet_gap.h): the active fleet before
  // the release, until it is on its way back (0 when none is out).
  int gap_released_from = 0;
  double first_t = -1;          // first call
  int initial_capacity = -1;    // active + starting at the first call (the learning floor)
  double last_work_t = -1;      // last sample with work signals
  double prev_t = -1;           // previous call
  double mean_prompt = 0;       // last known mean prompt tokens per request
  // Prompt sizes over the long run (exponentially decayed bucket counts): their spread is a
  // property of the workload, and one huge prompt in a minute must not move it.
  std::array<double, 24> prompt_sizes{};
  double hit_ratio = 0;         // last known prefix-cache hit ratio
  int last_plan = 0;            // active + tiers planned by the last call with work signals
  int last_active_plan = 0;
};

Decision decide(const PolicyConfig& config, PolicyState& state, const PolicyInput& input);

// Throws std::invalid_argument naming the field ("min_replicas", "stable_window", ...).
void validate(const PolicyConfig& config);

}  // namespace tidegate::scaler
