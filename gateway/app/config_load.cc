#include "config_load.h"

#include <algorithm>
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "tidegate/cache/semantic_cache.h"
#include "tidegate/common/config_error.h"
#include "tidegate/cost/accounting.h"

namespace tidegate::app {
namespace {

bool present(const YAML::Node& n) { return n && !n.IsNull(); }

// The folder relative paths in the file are read from (cache.embedder.model_dir), so the
// gateway finds the same files whatever directory it is started from.
std::string config_dir(const std::string& path) {
  std::error_code ec;
  const auto abs = std::filesystem::absolute(path, ec);
  return ec ? std::string() : abs.parent_path().lexically_normal().string();
}

int line_of(const YAML::Node& node) { return node.Mark().is_null() ? 0 : node.Mark().line + 1; }

// Only ConfigError leaves a loader: a yaml-cpp exception from a section's parser (`targets: 5`
// where a map belongs) used to escape it and, on SIGHUP, end the running gateway.
template <typename Parse>
void section(const char* name, const YAML::Node& node, Parse&& parse) {
  try {
    parse();
  } catch (const ConfigError&) {
    throw;
  } catch (const YAML::Exception& e) {
    throw ConfigError(name, e.mark.is_null() ? line_of(node) : e.mark.line + 1,
                      "not the shape this section expects (" + e.msg + ")");
  } catch (const std::exception& e) {
    throw ConfigError(name, line_of(node), e.what());
  }
}

}  // namespace

// Every section is validated before anything starts, so a typo anywhere fails at load (the
// cache's model folder included: --check-config names it when it is missing).
Sections load_sections(const std::string& path) {
  Sections s;
  s.gateway = gateway::load_gateway_config(path);
  const auto& g = *s.gateway;
  if (present(g.cache)) section("cache", g.cache, [&] { s.cache = cache::parse_cache_config(g.cache, "cache", config_dir(path)); });
  if (present(g.cost)) section("cost", g.cost, [&] { s.cost = cost::parse_cost_config(g.cost, "cost"); });
  if (present(g.scaler)) section("scaler", g.scaler, [&] { s.scaler = scaler::parse_scaler_config(g.scaler, "scaler"); });
  if (present(g.redis)) section("redis", g.redis, [&] { s.redis = redis::parse_redis_config(g.redis, "redis"); });
  if (present(g.rate_limits))
    section("rate_limits", g.rate_limits, [&] { s.rate_limits = ratelimit::parse_rate_limits(g.rate_limits, "rate_limits"); });
  if (s.cost) {
    for (std::size_t mi = 0; mi < g.models.size(); ++mi)
      for (std::size_t ri = 0; ri < g.models[mi].replicas.size(); ++ri) {
        const auto& r = g.models[mi].replicas[ri];
        if (!r.replica_class.empty() && !s.cost->has_class(r.replica_class))
          throw ConfigError("models[" + std::to_string(mi) + "].replicas[" + std::to_string(ri) + "].class", r.class_line,
                            "class '" + r.replica_class + "' of replica '" + r.id +
                                "' is not defined in cost.replica_classes");
      }
  }
  if (s.scaler) {
    auto gateway = std::make_shared<gateway::GatewayConfig>(g);
    for (std::size_t i = 0; i < s.scaler->pools.size(); ++i) {
      const auto& pool = s.scaler->pools[i];
      auto it = std::find_if(gateway->models.begin(), gateway->models.end(),
                             [&](const gateway::ModelConfig& m) { return m.name == pool.model; });
      if (it == gateway->models.end()) {
        const auto node = g.scaler["pools"][i]["model"];
        throw ConfigError("scaler.pools[" + std::to_string(i) + "].model", line_of(node),
                          "pool for model '" + pool.model + "', which models: does not define");
      }
      // At zero replicas the first request must wait for the replica it makes the scaler start.
      if (pool.policy.scale_to_zero) it->queue.hold_when_empty = true;
    }
    s.gateway = std::move(gateway);
  }
  return s;
}

}  // namespace tidegate::app
