#include "tidegate/replay/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tidegate/common/config_error.h"
#include "tidegate/scaler/config.h"

namespace tidegate::replay {
namespace {

void parse_profile(const YAML::Node& n, const std::string& path, ReplicaProfile& p) {
  if (!n) return;
  yaml_reject_unknown(n, path,
                      {"name", "cold_start", "warm_promotion", "usd_per_gpu_hour", "gpus_per_replica",
                       "slots_per_replica", "capacity_per_replica", "max_batch", "prefill_tokens_per_s", "decode_base", "decode_per_seq",
                       "kv_capacity_tokens", "max_num_batched_tokens", "decode_per_kv_token", "attention_context_tokens",
                       "prefix_caching", "tiers"});
  p.name = yaml_string(n, "name", path, p.name);
  p.cold_start_s = yaml_seconds(n, "cold_start", path, p.cold_start_s);
  p.warm_promotion_s = yaml_seconds(n, "warm_promotion", path, p.warm_promotion_s);
  p.usd_per_gpu_hour = yaml_double(n, "usd_per_gpu_hour", path, p.usd_per_gpu_hour, 0.0, 1000.0);
  p.gpus_per_replica = static_cast<int>(yaml_int(n, "gpus_per_replica", path, p.gpus_per_replica, 1, 64));
  p.slots_per_replica = static_cast<int>(yaml_int(n, "slots_per_replica", path, p.slots_per_replica, 1, 100000));
  p.capacity_per_replica = yaml_double(n, "capacity_per_replica", path, p.capacity_per_replica, 0.01, 1e6);
  auto& t = p.timing;
  t.max_batch = static_cast<int>(yaml_int(n, "max_batch", path, t.max_batch, 1, 100000));
  t.prefill_tokens_per_s = yaml_double(n, "prefill_tokens_per_s", path, t.prefill_tokens_per_s, 1.0, 1e9);
  t.decode_base_s = yaml_seconds(n, "decode_base", path, t.decode_base_s);
  t.decode_per_seq_s = yaml_seconds(n, "decode_per_seq", path, t.decode_per_seq_s);
  t.kv_capacity_tokens = yaml_int(n, "kv_capacity_tokens", path, t.kv_capacity_tokens, 1, 1'000'000'000);
  t.max_num_batched_tokens = yaml_int(n, "max_num_batched_tokens", path, t.max_num_batched_tokens, 0, 100'000'000);
  t.decode_per_kv_token_s = yaml_seconds(n, "decode_per_kv_token", path, t.decode_per_kv_token_s);
  t.prefill_attention_context_tokens =
      yaml_double(n, "attention_context_tokens", path, t.prefill_attention_context_tokens, 0.0, 1e9);
  t.prefix_caching = yaml_bool(n, "prefix_caching", path, t.prefix_caching);
  if (const auto tiers = n["tiers"]) {
    // The same keys as the policy's tiers, read by the scaler's parser.
    YAML::Node wrapper;
    wrapper["tiers"] = tiers;
    p.tiers = scaler::parse_policy_config(wrapper, path).tiers;
  }
  if (!(t.decode_base_s > 0) || t.decode_base_s > 10)
    throw ConfigError(path_join(path, "decode_base"), yaml_line(n), "must be in (0, 10] seconds");
}

void parse_replay(const YAML::Node& n, ReplayConfig& c) {
  const std::string path = "replay";
  yaml_reject_unknown(n, path,
                      {"profile", "slo", "replicas", "warmup", "warm_pool_size", "comparison_warm_pool", "hpa", "kpa",
                       "balancer", "prefix_load_bound"});
  c.options.warmup_s = yaml_seconds(n, "warmup", path, c.options.warmup_s);
  if (const auto b = n["balancer"]) {
    const auto text = yaml_string(n, "balancer", path);
    if (!parse_balancer(text, &c.options.balancer))
      throw ConfigError(path_join(path, "balancer"), yaml_line(b),
                        "unknown balancer \"" + text + "\" (least_outstanding, round_robin, prefix_aware, ideal)");
  }
  c.options.prefix_aware.load_bound =
      yaml_double(n, "prefix_load_bound", path, c.options.prefix_aware.load_bound, 1.0, 100.0);
  parse_profile(n["profile"], "replay.profile", c.options.profile);
  if (const auto s = n["slo"]) {
    yaml_reject_unknown(s, "replay.slo", {"ttft", "e2e", "attainment"});
    c.options.slo.ttft_s = yaml_seconds(s, "ttft", "replay.slo", c.options.slo.ttft_s);
    c.options.slo.e2e_s = yaml_seconds(s, "e2e", "replay.slo", c.options.slo.e2e_s);
    c.options.slo.attainment = yaml_double(s, "attainment", "replay.slo", c.options.slo.attainment, 0.0, 1.0);
  }
  if (const auto r = n["replicas"]) {
    yaml_reject_unknown(r, "replay.replicas", {"min", "max", "initial"});
    c.options.replicas_min = static_cast<int>(yaml_int(r, "min", "replay.replicas", c.options.replicas_min, 1, 10000));
    c.options.replicas_max = static_cast<int>(yaml_int(r, "max", "replay.replicas", c.options.replicas_max, 1, 10000));
    if (r["initial"] && r["initial"].IsScalar() && r["initial"].Scalar() == "auto")
      c.options.initial_active = 0;
    else
      c.options.initial_active =
          static_cast<int>(yaml_int(r, "initial", "replay.replicas", c.options.initial_active, 0, 10000));
  }
  c.tidegate.warm_pool_size =
      static_cast<int>(yaml_int(n, "warm_pool_size", path, c.tidegate.warm_pool_size, 0, 1000));
  c.comparison_warm_pool = static_cast<int>(yaml_int(n, "comparison_warm_pool", path, c.comparison_warm_pool, 0, 1000));
  if (const auto h = n["hpa"]) {
    const std::string p = "replay.hpa";
    yaml_reject_unknown(h, p, {"target_utilization", "sync_period", "tolerance", "scale_down_stabilization"});
    c.hpa.target_utilization = yaml_double(h, "target_utilization", p, c.hpa.target_utilization, 0.01, 10.0);
    c.hpa.sync_period_s = yaml_seconds(h, "sync_period", p, c.hpa.sync_period_s);
    c.hpa.tolerance = yaml_double(h, "tolerance", p, c.hpa.tolerance, 0.0, 0.99);
    c.hpa.scale_down_stabilization_s = yaml_seconds(h, "scale_down_stabilization", p, c.hpa.scale_down_stabilization_s);
  }
  if (const auto k = n["kpa"]) {
    const std::string p = "replay.kpa";
    yaml_reject_unknown(k, p, {"target_concurrency", "target_utilization", "stable_window", "panic_window",
                               "panic_threshold"});
    c.kpa.target_concurrency = yaml_double(k, "target_concurrency", p, c.kpa.target_concurrency, 0.0, 1e6);
    c.kpa.target_utilization = yaml_double(k, "target_utilization", p, c.kpa.target_utilization, 0.01, 1.0);
    c.kpa.stable_window_s = yaml_seconds(k, "stable_window", p, c.kpa.stable_window_s);
    c.kpa.panic_window_s = yaml_seconds(k, "panic_window", p, c.kpa.panic_window_s);
    c.kpa.panic_threshold = yaml_double(k, "panic_threshold", p, c.kpa.panic_threshold, 1.0, 100.0);
  }
}

}  // namespace

void align_policy(ReplayConfig& c) {
  // The policy's view of the replica and the SLO follows the replay's profile and SLO unless
  // the policy section sets them itself (a user tuning for another SLO than they report).
  auto& p = c.tidegate.policy;
  p.min_replicas = c.options.replicas_min;
  p.max_replicas = c.options.replicas_max;
  if (!c.policy_sets_capacity) p.capacity = capacity_from_profile(c.options.profile);
  if (!c.policy_sets_slo) {
    p.slo.ttft_s = c.options.slo.ttft_s;
    p.slo.attainment = std::min(c.options.slo.attainment, 0.9999);
  }
  if (!c.policy_sets_cold_start) p.cold_start_s = c.options.profile.cold_start_s;
  if (!c.policy_sets_tiers) p.tiers = c.options.profile.tiers;
}

ReplayConfig default_config() {
  ReplayConfig c;
  align_policy(c);
  return c;
}

ReplayConfig load_config_text(const std::string& yaml, ReplayConfig c) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::ParserException& e) {
    throw ConfigError("", e.mark.line + 1, std::string("YAML syntax: ") + e.msg);
  }
  yaml_reject_duplicate_keys(root);
  if (!root || root.IsNull()) return c;
  if (!root.IsMap()) throw ConfigError("", yaml_line(root), "expected a mapping with replay: and policy:");
  yaml_reject_unknown(root, "", {"replay", "policy"});
  if (root["replay"]) parse_replay(root["replay"], c);
  // The scaler's own parser: the replay reads exactly what the live scaler reads. The fleet
  // bounds are the replay's (replay.replicas), whatever the policy section says.
  if (const auto policy = root["policy"]) {
    c.tidegate.policy = scaler::parse_policy_config(policy, "policy");
    c.policy_sets_capacity = policy.IsMap() && policy["capacity"];
    c.policy_sets_slo = policy.IsMap() && policy["slo"];
    c.policy_sets_cold_start = policy.IsMap() && policy["cold_start"];
    c.policy_sets_tiers = policy.IsMap() && policy["tiers"];
  }
  align_policy(c);
  return c;
}

ReplayConfig load_config_file(const std::string& path, ReplayConfig base) {
  std::ifstream in(path);
  if (!in) throw ConfigError("", 0, "cannot open config file " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  return load_config_text(buf.str(), std::move(base));
}

std::string policy_yaml(const TidegatePolicyConfig& c) {
  std::ostringstream o;
  const auto& p = c.policy;
  o << "policy:\n";
  o << "  headroom: " << p.headroom << "\n";
  o << "  burst_memory: " << p.burst_memory_s << "s\n";
  o << "  noise_z: " << p.noise_z << "\n";
  if (p.scale_down_stabilization_s) o << "  scale_down_stabilization: " << *p.scale_down_stabilization_s << "s\n";
  else o << "  scale_down_stabilization: auto\n";
  if (p.targets.concurrency_per_replica || p.targets.queue_per_replica || p.targets.gpu_util || p.targets.kv_usage) {
    auto target = [&](const char* key, const std::optional<double>& v) {
      if (v) o << "    " << key << ": " << *v << "\n";
    };
    o << "  targets:\n";
    target("concurrency_per_replica", p.targets.concurrency_per_replica);
    target("queue_per_replica", p.targets.queue_per_replica);
    target("gpu_util", p.targets.gpu_util);
    target("kv_usage", p.targets.kv_usage);
  }
  o << "replay:\n  warm_pool_size: " << c.warm_pool_size << "\n";
  return o.str();
}

}  // namespace tidegate::replay
