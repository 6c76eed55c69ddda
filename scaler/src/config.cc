#include "tidegate/scaler/config.h"

#include <yaml-cpp/yaml.h>

#include <stdexcept>

#include "leader_election_config.h"
#include "tidegate/common/config_error.h"

namespace tidegate::scaler {
namespace {

// A missing key yields an invalid node that throws when indexed; a null node does not.
YAML::Node child(const YAML::Node& parent, const std::string& key) {
  const YAML::Node n = parent[key];
  return n ? n : YAML::Node();
}

std::string at(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

std::vector<std::string> string_list(const YAML::Node& parent, const std::string& key, const std::string& path) {
  std::vector<std::string> out;
  const auto node = parent[key];
  if (!node) return out;
  const auto full = path_join(path, key);
  if (node.IsScalar()) {  // "cmd --flag {port}": split on spaces
    std::string word;
    for (char c : node.Scalar() + " ") {
      if (c == ' ' || c == '\t') {
        if (!word.empty()) out.push_back(std::move(word));
        word.clear();
      } else {
        word += c;
      }
    }
    return out;
  }
  if (!node.IsSequence()) throw ConfigError(full, yaml_line(node), "expected a list of strings");
  for (std::size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar()) throw ConfigError(at(full, i), yaml_line(node[i]), "expected a string");
    out.push_back(node[i].Scalar());
  }
  return out;
}

std::vector<int> int_list(const YAML::Node& parent, const std::string& key, const std::string& path) {
  std::vector<int> out;
  const auto node = parent[key];
  if (!node) return out;
  if (!node.IsSequence()) throw ConfigError(path_join(path, key), yaml_line(node), "expected a list of integers");
  for (std::size_t i = 0; i < node.size(); ++i) {
    try {
      out.push_back(node[i].as<int>());
    } catch (const YAML::Exception&) {
      throw ConfigError(at(path_join(path, key), i), yaml_line(node[i]), "expected an integer");
    }
  }
  return out;
}

std::optional<double> optional_double(const YAML::Node& parent, const std::string& key, const std::string& path) {
  if (!parent[key] || parent[key].IsNull()) return std::nullopt;
  return yaml_double(parent, key, path, std::nullopt, 0.0);
}

double time_of_day(const YAML::Node& parent, const std::string& key, const std::string& path) {
  const auto text = yaml_string(parent, key, path);
  int h = -1, m = -1;
  char colon = 0;
  if (std::sscanf(text.c_str(), "%d%c%d", &h, &colon, &m) != 3 || colon != ':' || h < 0 || h > 24 || m < 0 || m > 59)
    throw ConfigError(path_join(path, key), yaml_line(parent[key]), "expected HH:MM (UTC), got '" + text + "'");
  return h * 3600.0 + m * 60.0;
}


void require_map(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping");
}

// The work model's keys of a `policy:` mapping.
void parse_work_model(const YAML::Node& n, const std::string& path, PolicyConfig& c) {
  c.work_model = yaml_bool(n, "work_model", path, c.work_model);
  c.headroom = yaml_double(n, "headroom", path, c.headroom, 0.1, 10.0);
  if (const auto cap = n["capacity"]) {
    const auto cp = path_join(path, "capacity");
    require_map(cap, cp);
    yaml_reject_unknown(cap, cp, {"prefill_tokens_per_s", "attention_context_tokens", "step", "overhead", "kv_tokens",
                                  "kv_target", "max_in_flight", "in_flight_target"});
    auto& k = c.capacity;
    k.prefill_tokens_per_s = yaml_double(cap, "prefill_tokens_per_s", cp, k.prefill_tokens_per_s, 1.0, 1e9);
    k.attention_context_tokens = yaml_double(cap, "attention_context_tokens", cp, k.attention_context_tokens, 0.0, 1e9);
    k.step_s = yaml_seconds(cap, "step", cp, k.step_s);
    k.overhead = yaml_double(cap, "overhead", cp, k.overhead, 0.0, 0.9);
    if (cap["kv_tokens"]) k.kv_tokens = optional_double(cap, "kv_tokens", cp);
    k.kv_target = yaml_double(cap, "kv_target", cp, k.kv_target, 0.01, 1.0);
    if (cap["max_in_flight"]) k.max_in_flight = optional_double(cap, "max_in_flight", cp);
    k.in_flight_target = yaml_double(cap, "in_flight_target", cp, k.in_flight_target, 0.01, 1.0);
  }
  if (const auto slo = n["slo"]) {
    const auto sp = path_join(path, "slo");
    require_map(slo, sp);
    yaml_reject_unknown(slo, sp, {"ttft", "attainment", "window"});
    c.slo.ttft_s = yaml_seconds(slo, "ttft", sp, c.slo.ttft_s);
    c.slo.attainment = yaml_double(slo, "attainment", sp, c.slo.attainment, 0.0, 0.9999);
    c.slo.window_s = yaml_seconds(slo, "window", sp, c.slo.window_s);
  }
  c.cold_start_s = yaml_seconds(n, "cold_start", path, c.cold_start_s);
  c.demand_window_s = yaml_seconds(n, "demand_window", path, c.demand_window_s);
  c.demand_short_window_s = yaml_seconds(n, "demand_short_window", path, c.demand_short_window_s);
  c.burst_memory_s = yaml_seconds(n, "burst_memory", path, c.burst_memory_s);
  c.noise_z = yaml_double(n, "noise_z", path, c.noise_z, 0.0, 10.0);
  c.learn_s = yaml_seconds(n, "learn", path, c.learn_s);
  c.hold_starting_fleet = yaml_bool(n, "hold_starting_fleet", path, c.hold_starting_fleet);
  c.quiet_gaps = yaml_bool(n, "quiet_gaps", path, c.quiet_gaps);
  if (const auto pr = n["predictive"]) {
    const auto pp = path_join(path, "predictive");
    require_map(pr, pp);
    yaml_reject_unknown(pr, pp, {"period"});
    c.predictive_period_s = yaml_seconds(pr, "period", pp, c.predictive_period_s);
  }
  if (const auto loop = n["slo_loop"]) {
    const auto lp = path_join(path, "slo_loop");
    require_map(loop, lp);
    yaml_reject_unknown(loop, lp, {"gain", "max_headroom", "spend_unused_budget"});
    c.headroom_gain = yaml_double(loop, "gain", lp, c.headroom_gain, 0.0, 100.0);
    c.max_headroom = yaml_double(loop, "max_headroom", lp, c.max_headroom, 1.0, 10.0);
    c.slo_loop_spends_budget = yaml_bool(loop, "spend_unused_budget", lp, c.slo_loop_spends_budget);
  }
  if (const auto tiers = n["tiers"]) {
    const auto tp = path_join(path, "tiers");
    if (!tiers.IsSequence()) throw ConfigError(tp, yaml_line(tiers), "expected a list");
    for (std::size_t i = 0; i < tiers.size(); ++i) {
      const auto ip = at(tp, i);
      require_map(tiers[i], ip);
      yaml_reject_unknown(tiers[i], ip, {"name", "price_fraction", "promotion"});
      WarmTier tier;
      tier.name = yaml_string(tiers[i], "name", ip);
      tier.price_fraction = yaml_double(tiers[i], "price_fraction", ip, std::nullopt, 0.0, 10.0);
      tier.promotion_s = yaml_seconds(tiers[i], "promotion", ip);
      if (!c.tiers.empty())
        throw ConfigError(ip, yaml_line(tiers[i]), "one standby tier at most (the lifecycle has one standby state)");
      c.tiers.push_back(std::move(tier));
    }
  }
}

PolicyConfig parse_policy(const YAML::Node& n, const std::string& path) {
  if (n && !n.IsNull()) require_map(n, path);
  yaml_reject_unknown(n, path,
                      {"min_replicas", "max_replicas", "scale_to_zero", "targets", "stable_window", "panic_window",
                       "panic_threshold", "scale_down_stabilization", "tolerance", "scale_up", "scale_down", "schedule",
                       "work_model", "headroom", "capacity", "slo", "cold_start", "demand_window", "demand_short_window",
                       "burst_memory", "noise_z", "learn", "hold_starting_fleet", "quiet_gaps", "predictive", "slo_loop", "tiers"});
  PolicyConfig c;
  c.min_replicas = static_cast<int>(yaml_int(n, "min_replicas", path, 1, 0, 10000));
  c.max_replicas = static_cast<int>(yaml_int(n, "max_replicas", path, 8, 0, 10000));
  c.scale_to_zero = yaml_bool(n, "scale_to_zero", path, false);
  if (const auto t = n["targets"]) {
    const auto tp = path_join(path, "targets");
    require_map(t, tp);
    yaml_reject_unknown(t, tp, {"concurrency_per_replica", "queue_per_replica", "gpu_util", "kv_usage"});
    c.targets.concurrency_per_replica = optional_double(t, "concurrency_per_replica", tp);
    c.targets.queue_per_replica = optional_double(t, "queue_per_replica", tp);
    c.targets.gpu_util = optional_double(t, "gpu_util", tp);
    c.targets.kv_usage = optional_double(t, "kv_usage", tp);
  }
  auto seconds = [&](const char* key, double fallback) { return yaml_seconds(n, key, path, fallback); };
  c.stable_window_s = seconds("stable_window", c.stable_window_s);
  c.panic_window_s = seconds("panic_window", c.panic_window_s);
  if (n["scale_down_stabilization"] && !(n["scale_down_stabilization"].IsScalar() &&
                                          n["scale_down_stabilization"].Scalar() == "auto"))
    c.scale_down_stabilization_s = seconds("scale_down_stabilization", 0);
  parse_work_model(n, path, c);
  c.panic_threshold = yaml_double(n, "panic_threshold", path, c.panic_threshold);
  c.tolerance = yaml_double(n, "tolerance", path, c.tolerance);
  for (const char* dir : {"scale_up", "scale_down"}) {
    const auto d = n[dir];
    if (!d) continue;
    const auto dp = path_join(path, dir);
    require_map(d, dp);
    yaml_reject_unknown(d, dp, {"max_rate", "max_step"});
    const bool up = std::string(dir) == "scale_up";
    double& rate = up ? c.scale_up_max_rate : c.scale_down_max_rate;
    int& step = up ? c.scale_up_max_step : c.scale_down_max_step;
    rate = yaml_double(d, "max_rate", dp, rate);
    step = static_cast<int>(yaml_int(d, "max_step", dp, step, 0, 10000));
  }
  if (const auto s = n["schedule"]) {
    const auto sp = path_join(path, "schedule");
    if (!s.IsSequence()) throw ConfigError(sp, yaml_line(s), "expected a list");
    for (std::size_t i = 0; i < s.size(); ++i) {
      const auto ip = at(sp, i);
      yaml_reject_unknown(s[i], ip, {"days", "from", "to", "min_replicas"});
      ScheduledMinimum m;
      m.from_s = time_of_day(s[i], "from", ip);
      m.to_s = time_of_day(s[i], "to", ip);
      m.min_replicas = static_cast<int>(yaml_int(s[i], "min_replicas", ip, std::nullopt, 0, 10000));
      const auto days = string_list(s[i], "days", ip);
      if (!days.empty()) m.days_mask = 0;
      static const char* kDays[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};
      for (const auto& day : days) {
        int idx = -1;
        for (int k = 0; k < 7; ++k)
          if (day.substr(0, 3) == kDays[k]) idx = k;
        if (idx < 0) throw ConfigError(path_join(ip, "days"), yaml_line(s[i]["days"]), "unknown day '" + day + "'");
        m.days_mask |= 1u << idx;
      }
      c.schedule.push_back(m);
    }
  }
  try {
    validate(c);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    const auto colon = what.find(':');
    const std::string field = what.substr(0, colon);
    YAML::Node where = n;
    std::string rest = field;
    while (!rest.empty() && where.IsMap()) {  // walk "scale_up.max_rate" to its line
      const auto dot = rest.find('.');
      const auto key = rest.substr(0, dot);
      const YAML::Node parent = where;
      const YAML::Node child = parent[key];
      if (!child) break;
      where = child;
      rest = dot == std::string::npos ? "" : rest.substr(dot + 1);
    }
    throw ConfigError(path_join(path, field), yaml_line(where), what.substr(colon + 2));
  }
  return c;
}

void parse_actuator(const YAML::Node& n, const std::string& path, ModelPoolConfig& pool) {
  if (!n || !n.IsMap()) throw ConfigError(path, yaml_line(n), "expected a mapping with 'kind'");
  const auto kind = yaml_string(n, "kind", path);
  if (kind == "process") {
    yaml_reject_unknown(n, path, {"kind", "command", "env", "gpus", "gpus_per_replica", "ports", "host", "health_path",
                                  "health_timeout", "stop_grace", "log_dir", "sleep_path", "wake_path", "sleep_timeout"});
    auto& p = pool.process;
    pool.actuator = ActuatorKind::kProcess;
    p.model = pool.model;
    p.command = string_list(n, "command", path);
    if (p.command.empty()) throw ConfigError(path_join(path, "command"), yaml_line(n), "required: the replica command");
    if (const auto env = n["env"]) {
      if (!env.IsMap()) throw ConfigError(path_join(path, "env"), yaml_line(env), "expected a mapping");
      for (const auto& kv : env) p.env[kv.first.Scalar()] = kv.second.Scalar();
    }
    p.gpus = int_list(n, "gpus", path);
    p.gpus_per_replica = static_cast<int>(yaml_int(n, "gpus_per_replica", path, 1, 1, 64));
    const auto ports = yaml_string(n, "ports", path, "20000-20999");
    if (std::sscanf(ports.c_str(), "%d-%d", &p.port_from, &p.port_to) != 2 || p.port_from < 1 ||
        p.port_to > 65535 || p.port_from > p.port_to)
      throw ConfigError(path_join(path, "ports"), yaml_line(n["ports"]), "expected a range such as 20000-20999");
    p.host = yaml_string(n, "host", path, p.host);
    p.health_path = yaml_string(n, "health_path", path, p.health_path);
    p.health_timeout_s = yaml_seconds(n, "health_timeout", path, p.health_timeout_s);
    p.stop_grace_s = yaml_seconds(n, "stop_grace", path, p.stop_grace_s);
    p.sleep_path = yaml_string(n, "sleep_path", path, p.sleep_path);
    p.wake_path = yaml_string(n, "wake_path", path, p.wake_path);
    p.sleep_timeout_s = yaml_seconds(n, "sleep_timeout", path, p.sleep_timeout_s);
    p.log_dir = yaml_string(n, "log_dir", path, "");
  } else if (kind == "kubernetes") {
    yaml_reject_unknown(n, path, {"kind", "api_server", "token_file", "ca_file", "token", "namespace", "deployment",
                                  "service", "warm_deployment", "warm_service", "port_name", "insecure_skip_tls_verify",
                                  "request_timeout", "retries", "backoff_initial", "backoff_max", "set_pod_deletion_cost",
                                  "sleep_path", "wake_path", "sleep_timeout"});
    auto& k = pool.kubernetes;
    pool.actuator = ActuatorKind::kKubernetes;
    k.model = pool.model;
    k.api_server = yaml_string(n, "api_server", path, "");
    k.token_file = yaml_string(n, "token_file", path, k.token_file);
    k.ca_file = yaml_string(n, "ca_file", path, k.ca_file);
    k.token = yaml_string(n, "token", path, "");
    k.ns = yaml_string(n, "namespace", path, "");
    k.deployment = yaml_string(n, "deployment", path);
    k.service = yaml_string(n, "service", path, k.deployment);
    k.warm_deployment = yaml_string(n, "warm_deployment", path, "");
    k.warm_service = yaml_string(n, "warm_service", path, k.warm_deployment);
    k.port_name = yaml_string(n, "port_name", path, "");
    k.insecure_skip_tls_verify = yaml_bool(n, "insecure_skip_tls_verify", path, false);
    k.request_timeout_s = yaml_seconds(n, "request_timeout", path, k.request_timeout_s);
    k.retries = static_cast<int>(yaml_int(n, "retries", path, k.retries, 0, 20));
    k.backoff_initial_s = yaml_seconds(n, "backoff_initial", path, k.backoff_initial_s);
    k.backoff_max_s = yaml_seconds(n, "backoff_max", path, k.backoff_max_s);
    k.set_pod_deletion_cost = yaml_bool(n, "set_pod_deletion_cost", path, true);
    k.sleep_path = yaml_string(n, "sleep_path", path, k.sleep_path);
    k.wake_path = yaml_string(n, "wake_path", path, k.wake_path);
    k.sleep_timeout_s = yaml_seconds(n, "sleep_timeout", path, k.sleep_timeout_s);
  } else if (kind == "static") {
    yaml_reject_unknown(n, path, {"kind", "endpoints"});
    pool.actuator = ActuatorKind::kStatic;
    const auto list = string_list(n, "endpoints", path);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto colon = list[i].rfind(':');
      int port = 0;
      if (colon == std::string::npos || std::sscanf(list[i].c_str() + colon + 1, "%d", &port) != 1 || port < 1 ||
          port > 65535)
        throw ConfigError(at(path_join(path, "endpoints"), i), yaml_line(n["endpoints"]), "expected host:port");
      pool.fixed.endpoints.push_back({list[i].substr(0, colon), static_cast<std::uint16_t>(port)});
    }
  } else {
    throw ConfigError(path_join(path, "kind"), yaml_line(n["kind"]),
                      "unknown actuator '" + kind + "' (expected process, kubernetes or static)");
  }
}

}  // namespace

PolicyConfig parse_policy_config(const YAML::Node& node, const std::string& path) {
  return parse_policy(node ? node : YAML::Node(), path);
}

std::shared_ptr<const ScalerConfig> parse_scaler_config(const YAML::Node& node, const std::string& path) {
  auto cfg = std::make_shared<ScalerConfig>();
  if (!node || node.IsNull()) return cfg;
  if (!node.IsMap()) throw ConfigError(path, yaml_line(node), "expected a mapping");
  yaml_reject_unknown(node, path, {"tick", "decisions_kept", "pools", "leader_election"});
  cfg->tick_s = yaml_seconds(node, "tick", path, 1.0);
  if (!(cfg->tick_s >= 0.05)) throw ConfigError(path_join(path, "tick"), yaml_line(node["tick"]), "must be >= 50ms");
  cfg->decisions_kept = static_cast<std::size_t>(yaml_int(node, "decisions_kept", path, 200, 1, 100000));
  const auto pools = node["pools"];
  const auto pp = path_join(path, "pools");
  if (pools && !pools.IsSequence()) throw ConfigError(pp, yaml_line(pools), "expected a list");
  for (std::size_t i = 0; pools && i < pools.size(); ++i) {
    const auto n = pools[i];
    const auto ip = at(pp, i);
    yaml_reject_unknown(n, ip, {"model", "replica_class", "actuator", "lifecycle", "signals", "policy"});
    ModelPoolConfig pool;
    pool.model = yaml_string(n, "model", ip);
    for (const auto& other : cfg->pools)
      if (other.model == pool.model) throw ConfigError(path_join(ip, "model"), yaml_line(n["model"]), "duplicate model");
    parse_actuator(child(n, "actuator"), path_join(ip, "actuator"), pool);
    static const char* kKinds[] = {"process", "kubernetes", "static"};
    pool.replica_class = yaml_string(n, "replica_class", ip, kKinds[static_cast<int>(pool.actuator)]);
    if (const auto l = n["lifecycle"]) {
      const auto lp = path_join(ip, "lifecycle");
      yaml_reject_unknown(l, lp, {"warm_pool_size", "startup_timeout", "drain_timeout", "max_parallel_starts",
                                  "unhealthy_replace_after"});
      pool.lifecycle.warm_pool_size = static_cast<int>(yaml_int(l, "warm_pool_size", lp, 0, 0, 1000));
      pool.lifecycle.startup_timeout_s = yaml_seconds(l, "startup_timeout", lp, pool.lifecycle.startup_timeout_s);
      pool.lifecycle.drain_timeout_s = yaml_seconds(l, "drain_timeout", lp, pool.lifecycle.drain_timeout_s);
      pool.lifecycle.max_parallel_starts = static_cast<int>(yaml_int(l, "max_parallel_starts", lp, 0, 0, 1000));
      pool.lifecycle.unhealthy_replace_after_s =
          yaml_seconds(l, "unhealthy_replace_after", lp, pool.lifecycle.unhealthy_replace_after_s);
    }
    pool.signals.model = pool.model;
    if (const auto s = n["signals"]) {
      const auto sp = path_join(ip, "signals");
      yaml_reject_unknown(s, sp, {"engine_metrics", "metrics_path", "dcgm_url", "gpus", "nvml", "missing_warn_every"});
      pool.signals.engine_metrics = yaml_bool(s, "engine_metrics", sp, true);
      pool.signals.metrics_path = yaml_string(s, "metrics_path", sp, "/metrics");
      pool.signals.dcgm_url = yaml_string(s, "dcgm_url", sp, "");
      pool.signals.gpus = int_list(s, "gpus", sp);
      pool.signals.nvml = yaml_bool(s, "nvml", sp, true);
      pool.signals.missing_warn_every_s = yaml_seconds(s, "missing_warn_every", sp, pool.signals.missing_warn_every_s);
      if (!(pool.signals.missing_warn_every_s >= 1))
        throw ConfigError(path_join(sp, "missing_warn_every"), yaml_line(s["missing_warn_every"]), "must be >= 1s");
    }
    if (pool.signals.gpus.empty()) pool.signals.gpus = pool.process.gpus;
    pool.policy = parse_policy(child(n, "policy"), path_join(ip, "policy"));
    // Warm replicas are engines running: they count within max_replicas. A pool that cannot
    // hold its warm replicas even at min_replicas is a config that means something else.
    const int room = pool.policy.max_replicas - pool.policy.min_replicas;
    if (pool.lifecycle.warm_pool_size > room) {
      const auto l = n["lifecycle"];
      throw ConfigError(path_join(ip, "lifecycle.warm_pool_size"), yaml_line(l["warm_pool_size"] ? l["warm_pool_size"] : l),
                        std::to_string(pool.lifecycle.warm_pool_size) + " warm replica(s) do not fit: warm replicas count "
                        "within policy.max_replicas (active + warm <= " + std::to_string(pool.policy.max_replicas) +
                        ") and policy.min_replicas is " + std::to_string(pool.policy.min_replicas) +
                        "; raise max_replicas to " + std::to_string(pool.policy.min_replicas + pool.lifecycle.warm_pool_size) +
                        " or lower warm_pool_size to " + std::to_string(std::max(0, room)));
    }
    pool.lifecycle.max_replicas = pool.policy.max_replicas;
    cfg->pools.push_back(std::move(pool));
  }
  cfg->leader_election = parse_leader_election(node["leader_election"], path_join(path, "leader_election"), cfg->pools);
  return cfg;
}

}  // namespace tidegate::scaler
