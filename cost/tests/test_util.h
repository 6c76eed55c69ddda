#pragma once
// Shared helpers of the cost unit tests: config from YAML text, metric sums from a registry.
#include <prometheus/registry.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "tidegate/cost/accounting.h"
#include "tidegate/cost/config.h"
#include "tidegate/testing/metrics.h"

namespace tidegate::cost::testing {

inline std::shared_ptr<const CostConfig> config_from(const std::string& yaml) {
  return parse_cost_config(YAML::Load(yaml), "cost");
}

using tidegate::testing::metric_sum;

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
