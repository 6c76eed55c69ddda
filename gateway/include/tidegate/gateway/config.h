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

enum class BalancerKind { kLeastOutstandingP2C, kRoundRobin, kWeighted, kPrefixAware };

// balancer: prefix_aware (routing/README.md). The prompt (a chat request's `messages` as sent, a
// completion's `prompt`) is cut into block_bytes blocks hashed as a chain; each replica has an
// LRU of the hashes routed to it, as large as the prompt text its KV cache holds:
//   blocks = kv_tokens_per_replica x bytes_per_token / block_bytes.
struct PrefixRoutingConfig {
  std::size_t block_bytes = 512;             // ~128 tokens (see routing/README.md: cost)
  std::size_t max_prompt_bytes = 1u << 20;   // hash at most this much of a prompt
  double kv_tokens_per_replica = 400000;     // vLLM, Llama-3-8B on one A100-80GB (sim/README.md)
  double bytes_per_token = 4;                // English text; the gateway's estimate elsewhere too
  double load_bound = 1.25;                  // no replica above this x its share of the load
  std::size_t min_match_blocks = 1;
  std::size_t index_blocks() const {
    return block_bytes ? static_cast<std::size_t>(kv_tokens_per_replica * bytes_per_token / static_cast<double>(block_bytes)) : 0;
  }
};

// Session affinity: requests of one session go to the replica that served the session before,
// while it is routable and within the load bound. A session is the header's value, else the
// OpenAI `user` field when use_user is set. Off when header is empty and use_user false.
struct AffinityConfig {
  std::string header;      // e.g. x-session-id
  bool use_user = false;
  std::size_t max_sessions = 100000;  // remembered sessions (least recent forgotten)
  bool enabled() const { return !header.empty() || use_user; }
};

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
  // The default: measured better (bench/RESULTS.md); a prompt shorter than a block, or one no
  // replica holds, is balanced as least_outstanding.
  BalancerKind balancer = BalancerKind::kPrefixAware;
  int max_concurrency_per_replica = 64;
  QueueConfig queue;
  HealthConfig health;
  PrefixRoutingConfig prefix;
  AffinityConfig affinity;
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
  YAML::Node redis;  // state shared by several gateways (redis/)
  YAML::Node rate_limits;
  std::string source_path;  // file it came from (for reload)

  const ModelConfig* find_model(const std::string& name) const;
};

// Throws tidegate::ConfigError naming the key path and line.
std::shared_ptr<const GatewayConfig> parse_gateway_config(const YAML::Node& root);
std::shared_ptr<const GatewayConfig> load_gateway_config(const std::string& path);
std::shared_ptr<const GatewayConfig> parse_gateway_config_text(const std::string& yaml_text);

}  // namespace tidegate::gateway
