#include "tidegate/gateway/config.h"

#include <boost/asio/ip/address.hpp>

#include <fstream>
#include <cctype>
#include <set>
#include <sstream>
#include <stdexcept>

#include "tidegate/common/config_error.h"
#include "tidegate/common/url.h"

namespace tidegate::gateway {
namespace {

std::string indexed(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

// "host:port" with a numeric port; the host may be empty ("" -> 0.0.0.0 is not assumed).
void parse_host_port(const std::string& text, const std::string& path, int line, std::string& host,
                     std::uint16_t& port) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw ConfigError(path, line, "expected \"host:port\", got \"" + text + "\"");
  host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const auto port_text = text.substr(colon + 1);
  int value = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9') throw ConfigError(path, line, "port must be a number, got \"" + port_text + "\"");
    value = value * 10 + (c - '0');
    if (value > 65535) break;
  }
  if (value > 65535) throw ConfigError(path, line, "port out of range: " + port_text);
  port = static_cast<std::uint16_t>(value);
}

// Replica URLs are plain http (TLS to model servers is a non-goal on a private network), with
// an explicit port and nothing after it: the gateway sends its own paths.
void parse_url(const std::string& url, const std::string& path, int line, ReplicaConfig& r) {
  common::HttpUrl u;
  try {
    u = common::parse_http_url(url);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(path, line, e.what());
  }
  if (!u.port_written) throw ConfigError(path, line, "expected \"http://host:port\", got \"" + url + "\"");
  if (u.path.find_first_not_of('/') != std::string::npos || u.has_query || url.find('#') != std::string::npos)
    throw ConfigError(path, line, "URL must not have a path: \"" + url + "\"");
  r.host = u.host;
  r.port = u.port;
}

BalancerKind parse_balancer(const YAML::Node& node, const std::string& path) {
  const auto text = yaml_string(node, "balancer", path, std::string("prefix_aware"));
  if (text == "least_outstanding" || text == "p2c") return BalancerKind::kLeastOutstandingP2C;
  if (text == "round_robin") return BalancerKind::kRoundRobin;
  if (text == "weighted") return BalancerKind::kWeighted;
  if (text == "prefix_aware") return BalancerKind::kPrefixAware;
  throw ConfigError(path_join(path, "balancer"), yaml_line(node["balancer"]),
                    "unknown balancer \"" + text + "\" (least_outstanding, round_robin, weighted, prefix_aware)");
}

ReplicaConfig parse_replica(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping");
  yaml_reject_unknown(node, path, {"id", "url", "weight", "class", "api_key"});
  ReplicaConfig r;
  r.id = yaml_string(node, "id", path);
  const auto url = yaml_string(node, "url", path);
  parse_url(url, path_join(path, "url"), yaml_line(node["url"]), r);
  r.weight = yaml_double(node, "weight", path, 1.0, 0.0);
  r.replica_class = yaml_string(node, "class", path, std::string());
  r.class_line = yaml_line(node["class"] ? node["class"] : node);
  r.api_key = yaml_string(node, "api_key", path, std::string());
  return r;
}

ModelConfig parse_model(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping");
  yaml_reject_unknown(node, path, {"name", "balancer", "max_concurrency_per_replica", "queue", "health", "replicas",
                                  "replica_api_key", "prefix_routing", "session_affinity"});
  ModelConfig m;
  m.name = yaml_string(node, "name", path);
  if (m.name.empty()) throw ConfigError(path_join(path, "name"), yaml_line(node["name"]), "must not be empty");
  m.balancer = parse_balancer(node, path);
  m.replica_api_key = yaml_string(node, "replica_api_key", path, std::string());
  m.max_concurrency_per_replica =
      static_cast<int>(yaml_int(node, "max_concurrency_per_replica", path, 64, 1, 1000000));
  if (const auto q = node["queue"]) {
    const auto qp = path_join(path, "queue");
    if (!q.IsMap()) throw ConfigError(qp, yaml_line(q), "expected a mapping");
    yaml_reject_unknown(q, qp, {"max_length", "max_wait", "hold_when_empty"});
    m.queue.max_length = static_cast<std::size_t>(yaml_int(q, "max_length", qp, 100, 0, 10000000));
    m.queue.max_wait_s = yaml_seconds(q, "max_wait", qp, 30.0);
    m.queue.hold_when_empty = yaml_bool(q, "hold_when_empty", qp, false);
    if (m.queue.max_wait_s < 0) throw ConfigError(path_join(qp, "max_wait"), yaml_line(q["max_wait"]), "must be >= 0");
  }
  if (const auto h = node["health"]) {
    const auto hp = path_join(path, "health");
    if (!h.IsMap()) throw ConfigError(hp, yaml_line(h), "expected a mapping");
    yaml_reject_unknown(h, hp, {"path", "interval", "timeout", "failures_to_eject"});
    m.health.path = yaml_string(h, "path", hp, std::string("/health"));
    if (m.health.path.empty() || m.health.path.front() != '/')
      throw ConfigError(path_join(hp, "path"), yaml_line(h["path"]), "must start with '/'");
    m.health.interval_s = yaml_seconds(h, "interval", hp, 5.0);
    m.health.timeout_s = yaml_seconds(h, "timeout", hp, 2.0);
    m.health.failures_to_eject = static_cast<int>(yaml_int(h, "failures_to_eject", hp, 3, 1, 1000));
  }
  if (const auto pr = node["prefix_routing"]) {
    const auto pp = path_join(path, "prefix_routing");
    if (!pr.IsMap()) throw ConfigError(pp, yaml_line(pr), "expected a mapping");
    yaml_reject_unknown(pr, pp, {"block_bytes", "max_prompt_bytes", "kv_tokens_per_replica", "bytes_per_token",
                                 "load_bound", "min_match_blocks"});
    constexpr std::uint64_t MiB = 1024 * 1024;
    m.prefix.block_bytes = static_cast<std::size_t>(yaml_bytes(pr, "block_bytes", pp, m.prefix.block_bytes, 16, 64 * 1024));
    m.prefix.max_prompt_bytes =
        static_cast<std::size_t>(yaml_bytes(pr, "max_prompt_bytes", pp, m.prefix.max_prompt_bytes, m.prefix.block_bytes, 64 * MiB));
    m.prefix.kv_tokens_per_replica = yaml_double(pr, "kv_tokens_per_replica", pp, m.prefix.kv_tokens_per_replica, 1000, 1e9);
    m.prefix.bytes_per_token = yaml_double(pr, "bytes_per_token", pp, m.prefix.bytes_per_token, 0.5, 64);
    m.prefix.load_bound = yaml_double(pr, "load_bound", pp, m.prefix.load_bound, 1.0, 100.0);
    m.prefix.min_match_blocks =
        static_cast<std::size_t>(yaml_int(pr, "min_match_blocks", pp, static_cast<std::int64_t>(m.prefix.min_match_blocks), 1, 1000000));
  }
  if (const auto af = node["session_affinity"]) {
    const auto ap = path_join(path, "session_affinity");
    if (!af.IsMap()) throw ConfigError(ap, yaml_line(af), "expected a mapping");
    yaml_reject_unknown(af, ap, {"header", "use_user", "max_sessions"});
    m.affinity.header = yaml_string(af, "header", ap, std::string());
    for (auto& c : m.affinity.header) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const char c : m.affinity.header)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
        throw ConfigError(path_join(ap, "header"), yaml_line(af["header"]), "not an HTTP header name: \"" + m.affinity.header + "\"");
    m.affinity.use_user = yaml_bool(af, "use_user", ap, false);
    m.affinity.max_sessions = static_cast<std::size_t>(yaml_int(af, "max_sessions", ap, 100000, 1, 100000000));
    if (!m.affinity.enabled())
      throw ConfigError(ap, yaml_line(af), "needs a header or use_user: true (or leave the section out)");
  }
  const auto reps = node["replicas"];
  const auto rp = path_join(path, "replicas");
  if (reps && !reps.IsNull()) {
    if (!reps.IsSequence()) throw ConfigError(rp, yaml_line(reps), "expected a list");
    std::set<std::string> ids;
    for (std::size_t i = 0; i < reps.size(); ++i) {
      auto r = parse_replica(reps[i], indexed(rp, i));
      if (!ids.insert(r.id).second)
        throw ConfigError(path_join(indexed(rp, i), "id"), yaml_line(reps[i]["id"]), "duplicate replica id \"" + r.id + "\"");
      m.replicas.push_back(std::move(r));
    }
  }
  return m;
}

void parse_limits(const YAML::Node& root, GatewayConfig& c) {
  const auto n = root["limits"];
  if (!n) return;
  if (!n.IsMap()) throw ConfigError("limits", yaml_line(n), "expected a mapping");
  yaml_reject_unknown(n, "limits", {"max_header_bytes", "max_body_bytes", "max_connections", "max_upstream_body_bytes"});
  // Upper bounds: Beast keeps the header limit in 32 bits (4GiB wrapped to 0, no limit at all),
  // and bodies are buffered whole, so each is capped at what one request could sanely need.
  constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;
  c.limits.max_header_bytes = yaml_bytes(n, "max_header_bytes", "limits", c.limits.max_header_bytes, 1 * KiB, 1 * MiB);
  c.limits.max_body_bytes = yaml_bytes(n, "max_body_bytes", "limits", c.limits.max_body_bytes, 1 * KiB, 1 * GiB);
  c.limits.max_upstream_body_bytes =
      yaml_bytes(n, "max_upstream_body_bytes", "limits", c.limits.max_upstream_body_bytes, 1 * KiB, 1 * GiB);
  c.limits.max_connections = static_cast<std::size_t>(yaml_int(n, "max_connections", "limits", 10000, 1, 10000000));
}

void parse_timeouts(const YAML::Node& root, GatewayConfig& c) {
  const auto n = root["timeouts"];
  if (!n) return;
  if (!n.IsMap()) throw ConfigError("timeouts", yaml_line(n), "expected a mapping");
  auto& t = c.timeouts;
  struct Field { const char* key; double* value; };
  const Field fields[] = {{"header_read", &t.header_read_s}, {"body_read", &t.body_read_s}, {"idle", &t.idle_s},
                          {"write", &t.write_s}, {"connect", &t.connect_s}, {"first_byte", &t.first_byte_s},
                          {"between_chunks", &t.between_chunks_s}, {"total", &t.total_s}, {"drain", &t.drain_s}};
  std::vector<std::string> known;
  for (const auto& f : fields) known.emplace_back(f.key);
  yaml_reject_unknown(n, "timeouts", known);
  for (const auto& f : fields) {
    *f.value = yaml_seconds(n, f.key, "timeouts", *f.value);
    if (*f.value <= 0) throw ConfigError(path_join("timeouts", f.key), yaml_line(n[f.key]), "must be > 0");
  }
}

void parse_keys(const YAML::Node& root, GatewayConfig& c) {
  const auto n = root["api_keys"];
  if (!n || n.IsNull()) return;
  if (!n.IsSequence()) throw ConfigError("api_keys", yaml_line(n), "expected a list");
  std::set<std::string> names, keys;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const auto p = indexed("api_keys", i);
    const auto& k = n[i];
    if (!k.IsMap()) throw ConfigError(p, yaml_line(k), "expected a mapping");
    yaml_reject_unknown(k, p, {"name", "key", "tenant", "tags"});
    ApiKey key;
    key.name = yaml_string(k, "name", p);
    key.key = yaml_string(k, "key", p);
    // The message names the entry, never the secret.
    if (key.key.size() < 8) throw ConfigError(path_join(p, "key"), yaml_line(k["key"]), "key must have at least 8 characters");
    key.tenant = yaml_string(k, "tenant", p, key.name);
    if (const auto tags = k["tags"]) {
      const auto tp = path_join(p, "tags");
      if (!tags.IsMap()) throw ConfigError(tp, yaml_line(tags), "expected a mapping");
      for (const auto& kv : tags) key.tags[kv.first.Scalar()] = yaml_string(tags, kv.first.Scalar(), tp);
    }
    if (!names.insert(key.name).second) throw ConfigError(path_join(p, "name"), yaml_line(k["name"]), "duplicate key name");
    if (!keys.insert(key.key).second) throw ConfigError(path_join(p, "key"), yaml_line(k["key"]), "duplicate key (same secret twice)");
    c.api_keys.push_back(std::move(key));
  }
}

// 127.0.0.0/8, ::1 and localhost: only this machine can connect.
bool is_loopback(std::string host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  const auto a = boost::asio::ip::make_address(host, ec);
  if (ec) return host == "localhost";
  return a.is_loopback();
}

void parse_auth(const YAML::Node& root, GatewayConfig& c) {
  if (!c.admin_key.empty() && c.admin_key.size() < 8)
    throw ConfigError("admin_key", yaml_line(root["admin_key"]), "must have at least 8 characters");
  enum class Auth { kKeys, kNone };
  c.auth_none = yaml_enum<Auth>(root, "auth", "", {{"keys", Auth::kKeys}, {"none", Auth::kNone}}) == Auth::kNone;
  if (c.auth_none && !c.api_keys.empty())
    throw ConfigError("auth", yaml_line(root["auth"]), "auth: none with api_keys listed; remove one of them");
  if (!c.auth_none && !is_loopback(c.listen_host) && (c.api_keys.empty() || c.admin_key.empty()))
    throw ConfigError("listen", yaml_line(root["listen"]),
                      "listening on " + c.listen_host + " (not loopback) needs api_keys and an admin_key; "
                      "set `auth: none` to serve without keys on purpose");
  if (const auto n = root["require_admin_key"]) {
    if (!n.IsSequence()) throw ConfigError("require_admin_key", yaml_line(n), "expected a list (metrics, dashboard)");
    for (std::size_t i = 0; i < n.size(); ++i) {
      const auto p = indexed("require_admin_key", i);
      const auto what = n[i].IsScalar() ? n[i].Scalar() : std::string();
      if (what == "metrics") c.metrics_need_admin_key = true;
      else if (what == "dashboard") c.dashboard_needs_admin_key = true;
      else throw ConfigError(p, yaml_line(n[i]), "expected metrics or dashboard");
    }
    if ((c.metrics_need_admin_key || c.dashboard_needs_admin_key) && c.admin_key.empty())
      throw ConfigError("require_admin_key", yaml_line(n), "needs an admin_key");
  }
}

}  // namespace

const ModelConfig* GatewayConfig::find_model(const std::string& name) const {
  for (const auto& m : models)
    if (m.name == name) return &m;
  return nullptr;
}

std::shared_ptr<const GatewayConfig> parse_gateway_config(const YAML::Node& root) {
  if (!root || !root.IsMap()) throw ConfigError("", yaml_line(root), "config must be a YAML mapping");
  yaml_reject_unknown(root, "", {"listen", "threads", "max_retries", "limits", "timeouts", "access_log", "api_keys",
                                 "admin_key", "auth", "require_admin_key", "models", "cache", "scaler", "cost", "redis", "rate_limits"});
  auto c = std::make_shared<GatewayConfig>();
  parse_host_port(yaml_string(root, "listen", "", std::string("127.0.0.1:8080")), "listen", yaml_line(root["listen"]),
                  c->listen_host, c->listen_port);
  c->threads = static_cast<int>(yaml_int(root, "threads", "", 0, 0, 1024));
  c->max_retries = static_cast<int>(yaml_int(root, "max_retries", "", 2, 0, 10));
  parse_limits(root, *c);
  parse_timeouts(root, *c);
  if (const auto a = root["access_log"]) {
    if (!a.IsMap()) throw ConfigError("access_log", yaml_line(a), "expected a mapping");
    yaml_reject_unknown(a, "access_log", {"path", "sample_rate"});
    c->access_log.path = yaml_string(a, "path", "access_log", std::string());
    c->access_log.sample_rate = yaml_double(a, "sample_rate", "access_log", 1.0, 0.0, 1.0);
  }
  parse_keys(root, *c);
  c->admin_key = yaml_string(root, "admin_key", "", std::string());
  parse_auth(root, *c);
  const auto models = root["models"];
  if (!models || !models.IsSequence() || models.size() == 0)
    throw ConfigError("models", yaml_line(models ? models : root), "at least one model is required (a list)");
  std::set<std::string> names;
  for (std::size_t i = 0; i < models.size(); ++i) {
    auto m = parse_model(models[i], indexed("models", i));
    if (!names.insert(m.name).second)
      throw ConfigError(path_join(indexed("models", i), "name"), yaml_line(models[i]["name"]), "duplicate model \"" + m.name + "\"");
    c->models.push_back(std::move(m));
  }
  // Opaque sections, parsed by their own areas. Shared rather than cloned: a clone drops the
  // nodes' marks, and every error in those sections then said "line 1". Nothing writes to the
  // document after this, so sharing keeps the config as immutable as a copy would.
  for (auto [name, into] : {std::pair{"cache", &c->cache}, std::pair{"scaler", &c->scaler}, std::pair{"cost", &c->cost},
                            std::pair{"redis", &c->redis}, std::pair{"rate_limits", &c->rate_limits}}) {
    const YAML::Node section = root[name];
    if (section.IsDefined()) into->reset(section);
  }
  return c;
}

std::shared_ptr<const GatewayConfig> parse_gateway_config_text(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError("", e.mark.line + 1, std::string("YAML syntax: ") + e.msg);
  }
  yaml_reject_duplicate_keys(root);
  return parse_gateway_config(root);
}

std::shared_ptr<const GatewayConfig> load_gateway_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("", 0, "cannot read config file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto parsed = parse_gateway_config_text(ss.str());
  auto copy = std::make_shared<GatewayConfig>(*parsed);
  copy->source_path = path;
  return copy;
}

}  // namespace tidegate::gateway
