#pragma once
// Runs several policies over one trace (in parallel threads; each run is independent and
// deterministic), the static-fleet search, and the tuner's Pareto frontier.
#include <functional>
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

struct TunerGrid {
  std::vector<double> concurrency_per_replica{8, 12, 16, 24, 32};
  std::vector<double> stable_window_s{30, 60, 120};
  std::vector<double> scale_down_stabilization_s{60, 300};
  std::vector<int> warm_pool_size{0, 1};
};

struct TunerPoint {
  TidegatePolicyConfig config;
  ReplaySummary summary;
};

struct TunerResult {
  std::vector<TunerPoint> all;
  std::vector<TunerPoint> frontier;  // non-dominated in (gpu_hours down, ttft attainment up), by cost
  int cheapest_meeting_slo = -1;     // index into frontier, -1 when none meets it
};

TunerResult tune(const Trace& trace, const ReplayConfig& base, const TunerGrid& grid, unsigned threads,
                 const std::function<void(std::size_t, std::size_t)>& progress = {});

// Indices of the points not dominated by another (lower or equal cost and higher or equal
// attainment, one strictly), sorted by cost.
std::vector<std::size_t> pareto_frontier(const std::vector<std::pair<double, double>>& cost_attainment);

}  // namespace tidegate::replay
