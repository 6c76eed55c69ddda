#pragma once
// Prometheus series of the scaler. Reason labels come from the bounded kReasonCodes set.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <set>
#include <string>

#include "tidegate/scaler/actuator.h"
#include "tidegate/scaler/lifecycle.h"
#include "tidegate/scaler/policy.h"
#include "tidegate/scaler/sampler.h"

namespace tidegate::scaler {

class ScalerMetrics final {
 public:
  explicit ScalerMetrics(prometheus::Registry& registry);
  void record(const std::string& model, const Decision& d, const PoolCounts& counts, const ActuatorStats& stats,
              std::uint64_t faults);
  // 1 while a signal is missing, 0 once it is back (so an alert clears).
  void record_missing(const std::string& model, const std::map<std::string, MissingSignal>& missing);
  // Per replica prefix-cache hit ratio from the engines' counters; series of replicas no longer
  // routed are removed.
  void record_prefix(const std::string& model, const std::map<std::string, double>& by_replica);
  // Leader election: 1 while this scaler acts for the pool; the elector's role changes.
  void record_leader(const std::string& model, bool leader, std::uint64_t transitions);

 private:
  prometheus::Family<prometheus::Gauge>& replicas_;
  prometheus::Family<prometheus::Gauge>& desired_;
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Family<prometheus::Counter>& actuator_errors_;
  prometheus::Family<prometheus::Counter>& actuator_retries_;
  prometheus::Family<prometheus::Counter>& faults_;
  prometheus::Family<prometheus::Gauge>& signal_;
  prometheus::Family<prometheus::Gauge>& missing_;
  prometheus::Family<prometheus::Gauge>& prefix_;
  prometheus::Family<prometheus::Gauge>& leader_;
  prometheus::Family<prometheus::Counter>& leader_transitions_;
  std::map<std::string, std::map<std::string, prometheus::Gauge*>> prefix_series_;  // model -> replica
  std::map<std::string, std::set<std::string>> missing_seen_;  // per model: every signal ever exported
};

}  // namespace tidegate::scaler
