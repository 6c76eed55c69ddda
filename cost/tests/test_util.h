#pragma once
// Shared helpers of the cost unit tests: config from YAML text, metric sums from a registry.
#include <prometheus/registry.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "tidegate/cost/accounting.h"
#include "tidegate/cost/config.h"

namespace tidegate::cost::testing {

inline std::shared_ptr<const CostConfig> config_from(const std::string& yaml) {
  return parse_cost_config(YAML::Load(yaml), "cost");
}

// Sum of every series of a counter or gauge family (optionally only where label == value).
inline double metric_sum(prometheus::Registry& registry, const std::string& family, const std::string& label = "",
                         const std::string& value = "") {
  double sum = 0;
  for (const auto& f : registry.Collect()) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      bool match = label.empty();
      for (const auto& l : m.label)
        if (l.name == label && l.value == value) match = true;
      if (!match) continue;
      sum += f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return sum;
}

// $1 per second when active, so expected costs read as seconds.
inline const char* kOneDollarPerSecond = R"(
replica_classes:
  gpu: {usd_per_hour: 3600}
  half: {usd_per_hour: 3600, state_fraction: {warm: 0.5, starting: 0.5}}
models: {llama: gpu}
api_models:
  gpt-4o-mini: {input_usd_per_1m: 1000, output_usd_per_1m: 4000}
attribution: {w_prefill: 1, w_decode: 4}
cache_lookup_usd: 0.001
)";

}  // namespace tidegate::cost::testing
