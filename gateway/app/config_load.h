#pragma once
// The whole config file as the gateway runs it: the gateway's own keys, then the cache, cost
// and scaler sections through their own parsers, then the checks across sections. Used by
// `--config`, `--check-config`, SIGHUP and the config fuzz target, so all four see one loader.
#include <memory>
#include <string>

#include "tidegate/cache/cache_config.h"
#include "tidegate/cost/config.h"
#include "tidegate/gateway/config.h"
#include "tidegate/ratelimit/config.h"
#include "tidegate/redis/config.h"
#include "tidegate/scaler/config.h"

namespace tidegate::app {

struct Sections {
  std::shared_ptr<const gateway::GatewayConfig> gateway;
  std::shared_ptr<const cache::CacheConfig> cache;    // null: no cache: section
  std::shared_ptr<const cost::CostConfig> cost;       // null: no cost: section
  std::shared_ptr<const scaler::ScalerConfig> scaler; // null: no scaler: section
  std::shared_ptr<const redis::RedisConfig> redis;    // null: no redis: section (this gateway alone)
  std::shared_ptr<const ratelimit::RateLimitConfig> rate_limits;  // null: no rate_limits: section
};

// Throws only tidegate::ConfigError (key path and line), whatever the file holds.
Sections load_sections(const std::string& path);

}  // namespace tidegate::app
