#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "tidegate/common/config_error.h"
#include "tidegate/redis/config.h"

namespace tidegate::redis {
namespace {

// "host:port" with a numeric IPv4 address or a name; hiredis resolves names when connecting.
void parse_address(const YAML::Node& node, const std::string& path, RedisConfig& c) {
  const auto text = yaml_string(node, "address", path, c.host + ":" + std::to_string(c.port));
  const auto key = path_join(path, "address");
  const int line = yaml_line(node["address"] ? node["address"] : node);
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw ConfigError(key, line, "expected host:port, got \"" + text + "\"");
  const auto port_text = text.substr(colon + 1);
  if (port_text.size() > 5 || !std::all_of(port_text.begin(), port_text.end(), [](unsigned char ch) { return std::isdigit(ch); }))
    throw ConfigError(key, line, "port must be a number from 1 to 65535, got \"" + port_text + "\"");
  const int port = std::stoi(port_text);
  if (port < 1 || port > 65535) throw ConfigError(key, line, "port must be a number from 1 to 65535, got " + port_text);
  c.host = text.substr(0, colon);
  c.port = static_cast<std::uint16_t>(port);
}

}  // namespace

std::shared_ptr<const RedisConfig> parse_redis_config(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping (address, key_prefix, ...)");
  yaml_reject_unknown(node, path,
                      {"address", "key_prefix", "command_timeout", "connect_timeout", "reconnect_min",
                       "reconnect_max", "refresh_interval", "expected_gateways", "cache_stream_max_len",
                       "routing_stream_max_len",
                       "password_env"});
  auto c = std::make_shared<RedisConfig>();
  parse_address(node, path, *c);
  c->key_prefix = yaml_string(node, "key_prefix", path, c->key_prefix);
  if (c->key_prefix.empty() || c->key_prefix.find_first_of(" \t\r\n") != std::string::npos)
    throw ConfigError(path_join(path, "key_prefix"), yaml_line(node["key_prefix"]),
                      "key_prefix must be non-empty and without whitespace");
  const auto positive = [&](const char* key, double fallback, double max) {
    const double v = yaml_seconds(node, key, path, fallback);
    if (v <= 0 || v > max)
      throw ConfigError(path_join(path, key), yaml_line(node[key]),
                        "must be more than 0 and at most " + std::to_string(static_cast<int>(max)) + " s");
    return v;
  };
  c->command_timeout_s = positive("command_timeout", c->command_timeout_s, 10);
  c->connect_timeout_s = positive("connect_timeout", c->connect_timeout_s, 60);
  c->reconnect_min_s = positive("reconnect_min", c->reconnect_min_s, 60);
  c->reconnect_max_s = positive("reconnect_max", c->reconnect_max_s, 600);
  if (c->reconnect_max_s < c->reconnect_min_s)
    throw ConfigError(path_join(path, "reconnect_max"), yaml_line(node["reconnect_max"]),
                      "reconnect_max must not be less than reconnect_min");
  c->refresh_interval_s = positive("refresh_interval", c->refresh_interval_s, 60);
  if (node["password_env"]) {
    const auto name = yaml_string(node, "password_env", path);
    const char* value = name.empty() ? nullptr : std::getenv(name.c_str());
    if (!value || !*value)
      throw ConfigError(path_join(path, "password_env"), yaml_line(node["password_env"]),
                        "environment variable '" + name + "' is not set (it holds Redis's password)");
    c->password = value;
  }
  c->expected_gateways = static_cast<int>(yaml_int(node, "expected_gateways", path, 1, 1, 1000));
  c->cache_stream_max_len =
      static_cast<std::size_t>(yaml_int(node, "cache_stream_max_len", path, 10000, 10, 100000000));
  c->routing_stream_max_len =
      static_cast<std::size_t>(yaml_int(node, "routing_stream_max_len", path, 10000, 10, 100000000));
  return c;
}

}  // namespace tidegate::redis
