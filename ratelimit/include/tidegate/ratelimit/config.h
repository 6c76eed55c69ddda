#pragma once
// The `rate_limits:` section: requests and tokens per minute per API key, tenant or model.
//
//   rate_limits:
//     - {scope: 'key:*', requests_per_minute: 600}          # each key separately
//     - {scope: 'tenant:acme', tokens_per_minute: 20000}
//     - {scope: 'model:llama', requests_per_minute: 1000, tokens_per_minute: 500000}
#include <memory>
#include <string>
#include <vector>

namespace YAML {
class Node;
}

namespace tidegate::ratelimit {

enum class ScopeKind { kKey, kTenant, kModel };

struct RateLimitRule {
  ScopeKind kind = ScopeKind::kKey;
  std::string match;               // a name, or "*" for each one separately
  double requests_per_minute = 0;  // 0: no request limit
  double tokens_per_minute = 0;    // 0: no token limit (prompt + completion, from the final usage)
};

struct RateLimitConfig {
  std::vector<RateLimitRule> rules;
};

const char* to_string(ScopeKind k);  // "key", "tenant", "model"

// Throws tidegate::ConfigError naming the key ("rate_limits[1].scope") and its line.
std::shared_ptr<const RateLimitConfig> parse_rate_limits(const YAML::Node& node, const std::string& path);

}  // namespace tidegate::ratelimit
