#pragma once
// Runs several policies over one trace (in parallel threads; each run is independent and
// deterministic), the static-fleet search, and the tuner's Pareto frontier.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tidegate/replay/config.h"
#include "tidegate/replay/replay.h"

namespace tidegate::replay {

struct NamedPolicy {
  std::string name;
  PolicyFactory make;
  int initial_active = -1;  // -1: ReplayOptions::initial_active
};

// Runs every policy (up to `threads` at once); results in input order.
std::vector<ReplayResult> run_all(const Trace& trace, const std::vector<NamedPolicy>& policies,
                                  const ReplayOptions& options, unsigned threads);

struct StaticSearchResult {
  bool found = false;              // some N <= replicas_max meets the SLO
  int replicas = 0;                // the smallest such N (or replicas_max when not found)
  ReplaySummary summary;           // of that N
  std::vector<ReplaySummary> tried;
};

// Smallest static fleet meeting the TTFT SLO, by binary search over [replicas_min,
// replicas_max]: attainment does not fall when replicas are added to a static fleet.
StaticSearchResult cheapest_static(const Trace& trace, const ReplayOptions& options);

// The baselines and Tidegate's policy with and without a warm pool, as documented in
// replay/README.md. The static fleet is searched separately (cheapest_static).
std::vector<NamedPolicy> comparison_policies(const ReplayConfig& config);

// The work model's knobs (scaler::PolicyConfig): the operator's headroom on measured demand,
// how long bursts are remembered, how many noise standard errors a swing must exceed to count
// as a burst, and the scale-down stabilisation (0 = auto: a cold start).
struct TunerGrid {
  std::vector<double> headroom{0.8, 0.9, 1.0, 1.2};
  std::vector<double> burst_memory_s{900, 1800, 3600};
  std::vector<double> noise_z{2, 3, 4};
  std::vector<double> scale_down_stabilization_s{0, 300};
  std::vector<int> warm_pool_size{0};
  // The trace is split in time: the first `tune_share` to choose on (itself cut in two halves,
  // each of which the choice must also meet), the rest held back to validate the choice.
  double tune_share = 2.0 / 3.0;
};

struct TunerPoint {
  TidegatePolicyConfig config;
  ReplaySummary summary;  // on the tuning part
  bool robust = false;    // meets the SLO on the tuning part and on each of its halves
};

struct TunerResult {
  std::vector<TunerPoint> all;
  std::vector<TunerPoint> frontier;  // non-dominated in (gpu_hours down, ttft attainment up), by cost
  int cheapest_meeting_slo = -1;     // index into `all` of the choice, -1 when none qualifies
  double tune_until_s = 0;           // the tuning part is [0, tune_until_s) of the trace
  // The choice on the held-back part, with that part's cheapest static fleet for reference.
  std::optional<ReplaySummary> held_back;
  std::optional<ReplaySummary> held_back_static;
  std::optional<ReplaySummary> held_back_default;  // the untuned policy there
};

// A label for a point: "headroom=0.9 memory=1800s z=3 sd=auto warm=0".
std::string describe(const TidegatePolicyConfig& config);

TunerResult tune(const Trace& trace, const ReplayConfig& base, const TunerGrid& grid, unsigned threads,
                 const std::function<void(std::size_t, std::size_t)>& progress = {});

// Sets gpu_hours_vs_static / _vs_optimum from the reference runs (either may be null).
void annotate(ReplaySummary& summary, const ReplaySummary* cheapest_static, const ReplaySummary* optimum);

// Indices of the points not dominated by another (lower or equal cost and higher or equal
// attainment, one strictly), sorted by cost.
std::vector<std::size_t> pareto_frontier(const std::vector<std::pair<double, double>>& cost_attainment);

}  // namespace tidegate::replay
