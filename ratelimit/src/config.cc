#include <yaml-cpp/yaml.h>

#include <set>

#include "tidegate/common/config_error.h"
#include "tidegate/ratelimit/config.h"

namespace tidegate::ratelimit {

const char* to_string(ScopeKind k) {
  switch (k) {
    case ScopeKind::kKey: return "key";
    case ScopeKind::kTenant: return "tenant";
    case ScopeKind::kModel: return "model";
  }
  return "key";
}

namespace {

RateLimitRule parse_rule(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap())
    throw ConfigError(path, yaml_line(node), "expected a mapping with scope and requests_per_minute or tokens_per_minute");
  yaml_reject_unknown(node, path, {"scope", "requests_per_minute", "tokens_per_minute"});
  RateLimitRule r;
  const auto scope = yaml_string(node, "scope", path);
  const auto bad_scope = [&](const std::string& why) {
    return ConfigError(path_join(path, "scope"), yaml_line(node["scope"]),
                       why + " (use key:NAME, tenant:NAME or model:NAME; * for each one)");
  };
  const auto colon = scope.find(':');
  if (colon == std::string::npos) throw bad_scope("'" + scope + "' has no kind");
  const auto kind = scope.substr(0, colon);
  r.match = scope.substr(colon + 1);
  if (kind == "key") r.kind = ScopeKind::kKey;
  else if (kind == "tenant") r.kind = ScopeKind::kTenant;
  else if (kind == "model") r.kind = ScopeKind::kModel;
  else throw bad_scope("unknown scope kind '" + kind + "'");
  if (r.match.empty()) throw bad_scope("'" + scope + "' names nothing");
  r.requests_per_minute = yaml_double(node, "requests_per_minute", path, 0.0, 0.0, 1e12);
  r.tokens_per_minute = yaml_double(node, "tokens_per_minute", path, 0.0, 0.0, 1e15);
  if (r.requests_per_minute <= 0 && r.tokens_per_minute <= 0)
    throw ConfigError(path, yaml_line(node), "a rate limit needs requests_per_minute or tokens_per_minute above 0");
  return r;
}

}  // namespace

std::shared_ptr<const RateLimitConfig> parse_rate_limits(const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence())
    throw ConfigError(path, yaml_line(node), "expected a list of {scope, requests_per_minute, tokens_per_minute}");
  auto c = std::make_shared<RateLimitConfig>();
  std::set<std::string> scopes;
  for (std::size_t i = 0; i < node.size(); ++i) {
    const auto p = path + "[" + std::to_string(i) + "]";
    auto r = parse_rule(node[i], p);
    const auto name = std::string(to_string(r.kind)) + ":" + r.match;
    if (!scopes.insert(name).second)
      throw ConfigError(path_join(p, "scope"), yaml_line(node[i]["scope"]),
                        "'" + name + "' has a rate limit already: put both limits in one entry");
    c->rules.push_back(std::move(r));
  }
  return c;
}

}  // namespace tidegate::ratelimit
