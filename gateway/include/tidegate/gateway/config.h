#pragma once
// The gateway's configuration: parsed and validated once, then shared read-only
// (std::shared_ptr<const GatewayConfig>). A SIGHUP builds a new one and swaps the pointer.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tidegate::gateway {

enum class BalancerKind { kLeastOutstandingP2C, kRoundRobin, kWeighted };

struct ReplicaConfig {
  std::string id;
  std::string host;
  std::uint16_t port = 0;
  double weight = 1.0;
  std::string replica_class;  // cost class ("a100", "h100", ...), opaque to the gateway
  // Sent upstream as "Authorization: Bearer <api_key>" (vLLM --api-key). Never the client's key.
  std::string api_key;
  int class_line = 0;  // where the file names the class: checked against cost: later
};

struct QueueConfig {
  std::size_t max_length = 100;
  double max_wait_s = 30.0;
  // With no routable replica, wait (up to max_wait) instead of answering 503 at once: for pools
  // that scale to zero, where the first request is what makes the scaler start a replica.
  // The composed gateway turns it on for scaler pools with scale_to_zero.
  bool hold_when_empty = false;
};

struct HealthConfig {
  std::string path = "/health";
  double interval_s = 5.0;  // 0 disables active probes
  double timeout_s = 2.0;
  int failures_to_eject = 3;
};

struct ModelConfig {
  std::string name;
  BalancerKind balancer = BalancerKind::kLeastOutstandingP2C;
  int max_concurrency_per_replica = 64;
  QueueConfig queue;
  HealthConfig health;
  std::vector<ReplicaConfig> replicas;  // may be empty when a scaler manages the model
  // Upstream key for replicas without their own api_key (also those the scaler adds).
  std::string replica_api_key;
};

struct LimitsConfig {
  std::uint64_t max_header_bytes = 16 * 1024;
  std::uint64_t max_body_bytes = 8 * 1024 * 1024;
  std::size_t max_connections = 10000;
  // A non-stream upstream body is read whole (usage, cache); past this the answer is a 502.
  std::uint64_t max_upstream_body_bytes = 64ull * 1024 * 1024;
};

struct TimeoutsConfig {
  double header_read_s = 10.0;    // whole request head must arrive in this (slow-loris)
  double body_read_s = 30.0;
  double idle_s = 60.0;           // keep-alive idle between requests
  double write_s = 30.0;          // one write to the client
  double connect_s = 2.0;         // upstream TCP connect
  double first_byte_s = 60.0;     // upstream response head
  double between_chunks_s = 30.0; // upstream idle while streaming
  double total_s = 600.0;         // whole upstream exchange
  double drain_s = 30.0;          // SIGTERM: in-flight requests get this long
};

struct AccessLogConfig {
  std::string path;         // empty: stderr
  double sample_rate = 1.0; // successes are sampled; errors are always logged
};

struct ApiKey {
  std::string name;  // logged instead of the key
  std::string key;
  std::string tenant;
  std::map<std::string, std::string> tags;
};

struct GatewayConfig {
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 8080;
  int threads = 0;    // 0: one per core
  int max_retries = 2;
  LimitsConfig limits;
  TimeoutsConfig timeouts;
  AccessLogConfig access_log;
  std::vector<ApiKey> api_keys;  // empty: open mode, tenant "anonymous"
  std::string admin_key;
  // `auth: none`: serve without keys on a non-loopback address, on purpose. Without it such a
  // listener needs api_keys and an admin_key (the config is refused otherwise).
  bool auth_none = false;
  // require_admin_key: [metrics, dashboard]: these need the admin key too.
  bool metrics_need_admin_key = false;
  bool dashboard_needs_admin_key = false;
  std::vector<ModelConfig> models;
  // Sections owned by other libraries, kept verbatim for them to parse.
  YAML::Node cache;
  YAML::Node scaler;
  YAML::Node cost;
  std::string source_path;  // file it came from (for reload)

  const ModelConfig* find_model(const std::string& name) const;
};

// Throws tidegate::ConfigError naming the key path and line.
std::shared_ptr<const GatewayConfig> parse_gateway_config(const YAML::Node& root);
std::shared_ptr<const GatewayConfig> load_gateway_config(const std::string& path);
std::shared_ptr<const GatewayConfig> parse_gateway_config_text(const std::string& yaml_text);

}  // namespace tidegate::gateway
