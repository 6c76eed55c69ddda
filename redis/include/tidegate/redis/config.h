#pragma once
// The `redis:` config section. Absent means every gateway keeps its state alone (budgets, rate
// limits and cache local), exactly as before Redis support existed.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace YAML {
class Node;
}

namespace tidegate::redis {

struct RedisConfig {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  // Every key this gateway writes starts with "<key_prefix>:", so several fleets can share one Redis.
  std::string key_prefix = "tidegate";
  // Sent with AUTH on every connection; read from the environment variable `password_env` names
  // (a password does not belong in a config file). Empty: no AUTH.
  std::string password;
  // A command not answered within this time fails (the caller goes on in degraded mode).
  double command_timeout_s = 0.05;
  double connect_timeout_s = 0.5;
  // Reconnects back off exponentially from reconnect_min to reconnect_max.
  double reconnect_min_s = 0.1;
  double reconnect_max_s = 5.0;
  // How often shared totals (budget spend) are re-read from Redis into the local cache.
  double refresh_interval_s = 0.1;
  // How many gateways share the limits: while Redis is down each gateway enforces 1/expected_gateways
  // of every hard budget locally, so N isolated gateways together stay within the limit.
  int expected_gateways = 1;
  // The shared cache's stream (<key_prefix>:cache) is trimmed to about this many events.
  std::size_t cache_stream_max_len = 10000;
  // The routers' stream (<key_prefix>:routing: prefix placements and session pins, one entry per
  // batch of up to 5 ms) is trimmed to about this many entries.
  std::size_t routing_stream_max_len = 10000;
};

// Parses the `redis:` mapping; throws tidegate::ConfigError naming the key and line.
// `path` is the section's own path ("redis").
std::shared_ptr<const RedisConfig> parse_redis_config(const YAML::Node& node, const std::string& path);

}  // namespace tidegate::redis
