#pragma once
// The offline optimum: a baseline that sees the whole trace in advance and looks for the
// fewest GPU-hours that meet the SLO, over the same actuator (cold starts honoured) as every
// online policy. It is the limit the online policies are measured against.
//
// Search: the trace is cut into segments; segment by segment, from the fleet state the chosen
// schedule leads to (forked: every replica's engine is copied), the smallest active count
// whose requests meet the SLO attainment is found by bisection. The schedule is then replayed
// through the normal replay loop by ScheduledPolicy, which asks for each segment's count a
// cold start ahead and keeps replicas through dips shorter than a cold start (a stop and
// restart would cost more than the dip saves); that replay's figures are the optimum's. When
// it misses the SLO, the per-segment target is raised and the search repeats; when it meets it,
// the per-segment target is bisected down (segments differ, and the miss budget is the whole
// trace's) to the cheapest schedule whose replay still meets the SLO.
//
// The forks dispatch with the run's balancer (and, when it is not least-loaded, the search is run
// again with least-loaded forks, the cheaper result kept); every schedule is replayed with the
// run's balancer. It is the best schedule the search finds, so an upper bound on the true
// optimum; warm tiers are not used by it.
#include <optional>
#include <vector>

#include "tidegate/replay/policy.h"
#include "tidegate/replay/replay.h"

namespace tidegate::replay {

struct OptimumOptions {
  double segment_s = 30;   // schedule resolution
  int max_rounds = 4;      // searches with a raised per-segment target when the replay misses
  int refine_steps = 5;    // bisection steps on the per-segment target, toward the cheapest that meets
  // A constant fleet known to meet the SLO (the cheapest static one), 0 = none. The optimum is
  // never dearer: no segment gets more (a static fleet meets the trace's miss budget by spending
  // it in the bursts, which a per-segment search would otherwise buy its way out of), and it is
  // the answer when the search finds nothing cheaper that meets the SLO.
  int static_fleet = 0;
  // How the search's forks dispatch. Unset: as the run does and, when that is not least-loaded,
  // least-loaded too; each schedule is replayed with the run's routing and the cheaper kept (the
  // search is greedy, and neither dispatch finds the cheaper schedule on every trace).
  std::optional<Balancer> search_balancer;
};

struct OptimumResult {
  bool found = false;             // the replayed schedule meets the SLO
  std::vector<int> schedule;      // active replicas per segment
  double segment_s = 30;
  ReplaySummary summary;          // of the replayed schedule ("optimum")
  int rounds = 0;
};

OptimumResult offline_optimum(const Trace& trace, const ReplayOptions& options, const OptimumOptions& search = {});

// Plays a schedule: at time t the target is the largest count of the segments overlapping
// [t, t + lead], lead = a cold start plus a decision period, so replicas are ready when their
// segment starts and dips shorter than a cold start are held through.
class ScheduledPolicy final : public ScalingPolicy {
 public:
  ScheduledPolicy(std::vector<int> schedule, double segment_s, double lead_s)
      : schedule_(std::move(schedule)), segment_s_(segment_s), lead_s_(lead_s) {}
  std::string name() const override { return "optimum"; }
  double decide_period_s() const override { return 1; }
  ScaleTarget decide(const ClusterObservation& obs) override;

 private:
  std::vector<int> schedule_;
  double segment_s_, lead_s_;
};

}  // namespace tidegate::replay
