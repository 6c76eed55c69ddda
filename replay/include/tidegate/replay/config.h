#pragma once
// Everything a replay run is configured with, from defaults, a YAML file and CLI flags (in
// that order of precedence, lowest first). Built once, then read-only.
#include <string>

#include "tidegate/replay/baselines.h"
#include "tidegate/replay/replay.h"
#include "tidegate/replay/tidegate_policy.h"

namespace tidegate::replay {

struct ReplayConfig {
  ReplayOptions options;
  TidegatePolicyConfig tidegate;   // the policy under test ("tidegate" row)
  int comparison_warm_pool = 1;    // the "tidegate+warm"/"tidegate-nowarm" counterpart's pool
  HpaConfig hpa;
  KpaConfig kpa;
  // Which parts of the policy the config file set itself; the rest follows the profile and SLO.
  bool policy_sets_capacity = false, policy_sets_slo = false, policy_sets_cold_start = false,
       policy_sets_tiers = false;
};

// Re-derives what the policy did not set (capacity from the profile, SLO, cold start) and its
// replica bounds from the replay's; call after changing options.
void align_policy(ReplayConfig& config);

// The documented defaults (replay/README.md): tidegate_sim's TimingParams, the scaler's
// PolicyConfig, Kubernetes/Knative defaults for the baselines.
ReplayConfig default_config();

// Applies the `replay:` and `policy:` sections of a YAML file over `base`. Unknown keys and
// bad values throw ConfigError naming the key and line.
ReplayConfig load_config_file(const std::string& path, ReplayConfig base);
ReplayConfig load_config_text(const std::string& yaml, ReplayConfig base);

// The `policy:` YAML snippet (the scaler's keys) for a setting, as the tuner prints it.
std::string policy_yaml(const TidegatePolicyConfig& config);

}  // namespace tidegate::replay
