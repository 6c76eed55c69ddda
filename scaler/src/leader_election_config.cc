#include "leader_election_config.h"

#include <yaml-cpp/yaml.h>

#include "tidegate/common/config_error.h"

namespace tidegate::scaler {

LeaderElectionConfig parse_leader_election(const YAML::Node& n, const std::string& path,
                                           const std::vector<ModelPoolConfig>& pools) {
  LeaderElectionConfig c;
  if (!n || n.IsNull()) return c;
  if (!n.IsMap()) throw ConfigError(path, yaml_line(n), "expected a mapping with 'kind'");
  yaml_reject_unknown(n, path, {"kind", "lease_name", "namespace", "identity", "lease_duration", "renew_deadline",
                                "retry_period", "api_server", "token", "token_file", "ca_file",
                                "insecure_skip_tls_verify", "request_timeout", "lock_file"});
  if (!n["kind"]) throw ConfigError(path_join(path, "kind"), yaml_line(n), "required: kubernetes, file or none");
  c.kind = yaml_enum<ElectionKind>(n, "kind", path,
                                   {{"none", ElectionKind::kNone}, {"kubernetes", ElectionKind::kKubernetes},
                                    {"file", ElectionKind::kFile}});
  c.lease_name = yaml_string(n, "lease_name", path, c.lease_name);
  c.identity = yaml_string(n, "identity", path, "");
  c.lease_duration_s = yaml_seconds(n, "lease_duration", path, c.lease_duration_s);
  c.renew_deadline_s = yaml_seconds(n, "renew_deadline", path, c.renew_deadline_s);
  c.retry_period_s = yaml_seconds(n, "retry_period", path, c.retry_period_s);
  c.request_timeout_s = yaml_seconds(n, "request_timeout", path, c.request_timeout_s);
  auto line = [&](const char* key) { return yaml_line(n[key] ? n[key] : n); };
  // The fence: a leader stops at renew_deadline, others may take over at lease_duration.
  if (!(c.renew_deadline_s < c.lease_duration_s))
    throw ConfigError(path_join(path, "renew_deadline"), line("renew_deadline"),
                      "must be shorter than lease_duration (" + std::to_string(c.lease_duration_s) +
                          "s): a leader must stop acting before its lease can pass to another");
  if (!(c.retry_period_s > 0 && c.retry_period_s < c.renew_deadline_s))
    throw ConfigError(path_join(path, "retry_period"), line("retry_period"),
                      "must be above 0 and shorter than renew_deadline (" + std::to_string(c.renew_deadline_s) +
                          "s), or one failed renewal ends the leadership");
  if (!(c.request_timeout_s > 0 && c.request_timeout_s < c.renew_deadline_s))
    throw ConfigError(path_join(path, "request_timeout"), line("request_timeout"),
                      "must be above 0 and shorter than renew_deadline");
  if (c.lease_duration_s < 1)
    throw ConfigError(path_join(path, "lease_duration"), line("lease_duration"),
                      "must be at least 1s (leaseDurationSeconds is whole seconds)");
  c.lock_file = yaml_string(n, "lock_file", path, "");
  if (c.kind == ElectionKind::kFile && c.lock_file.empty())
    throw ConfigError(path_join(path, "lock_file"), yaml_line(n), "required with kind: file");
  if (c.kind != ElectionKind::kFile && !c.lock_file.empty())
    throw ConfigError(path_join(path, "lock_file"), line("lock_file"), "only for kind: file");

  // Unset API settings follow the pools' Kubernetes actuator: the same cluster and account.
  const KubernetesActuatorConfig* k = nullptr;
  for (const auto& p : pools)
    if (!k && p.actuator == ActuatorKind::kKubernetes) k = &p.kubernetes;
  const KubernetesActuatorConfig defaults;
  if (!k) k = &defaults;
  c.api_server = yaml_string(n, "api_server", path, k->api_server);
  c.ns = yaml_string(n, "namespace", path, k->ns);
  c.token = yaml_string(n, "token", path, k->token);
  c.token_file = yaml_string(n, "token_file", path, k->token_file);
  c.ca_file = yaml_string(n, "ca_file", path, k->ca_file);
  c.namespace_file = k->namespace_file;
  c.insecure_skip_tls_verify = yaml_bool(n, "insecure_skip_tls_verify", path, k->insecure_skip_tls_verify);
  return c;
}

}  // namespace tidegate::scaler
