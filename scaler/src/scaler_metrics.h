#pragma once
// Prometheus series of the scaler. Reason labels come from the bounded kReasonCodes set.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <string>

#include "tidegate/scaler/actuator.h"
#include "tidegate/scaler/lifecycle.h"
#include "tidegate/scaler/policy.h"

namespace tidegate::scaler {

class ScalerMetrics final {
 public:
  explicit ScalerMetrics(prometheus::Registry& registry);
  void record(const std::string& model, const Decision& d, const PoolCounts& counts, const ActuatorStats& stats,
              std::uint64_t faults);

 private:
  prometheus::Family<prometheus::Gauge>& replicas_;
  prometheus::Family<prometheus::Gauge>& desired_;
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Family<prometheus::Counter>& actuator_errors_;
  prometheus::Family<prometheus::Counter>& actuator_retries_;
  prometheus::Family<prometheus::Counter>& faults_;
  prometheus::Family<prometheus::Gauge>& signal_;
};

}  // namespace tidegate::scaler
