#include "reload_scope.h"

#include <yaml-cpp/yaml.h>

namespace tidegate::app {
namespace {

// Sections are compared as YAML text: key order and values, not the lines they sit on, so moving
// a section in the file is not a change and any edit inside one is.
std::string text_of(const YAML::Node& node) { return node && !node.IsNull() ? YAML::Dump(node) : std::string(); }

}  // namespace

std::vector<std::string> needs_restart(const gateway::GatewayConfig& running, const gateway::GatewayConfig& next) {
  std::vector<std::string> out;
  if (running.listen_host != next.listen_host || running.listen_port != next.listen_port) out.push_back("listen");
  if (running.threads != next.threads) out.push_back("threads");
  if (running.access_log.path != next.access_log.path) out.push_back("access_log.path");
  const std::pair<const char*, const YAML::Node gateway::GatewayConfig::*> sections[] = {
      {"cache", &gateway::GatewayConfig::cache},   {"cost", &gateway::GatewayConfig::cost},
      {"scaler", &gateway::GatewayConfig::scaler}, {"redis", &gateway::GatewayConfig::redis},
      {"rate_limits", &gateway::GatewayConfig::rate_limits},
  };
  for (const auto& [name, member] : sections)
    if (text_of(running.*member) != text_of(next.*member)) out.push_back(name);
  return out;
}

}  // namespace tidegate::app
