// parse_scaler_config: a full section, and bad input rejected with key path and line.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "tidegate/common/config_error.h"
#include "tidegate/scaler/config.h"

namespace tidegate::scaler {
namespace {

constexpr const char* kFull = R"(scaler:
  tick: 500ms
  decisions_kept: 50
  pools:
    - model: llama
      replica_class: h100
      actuator:
        kind: process
        command: [tidegate-sim, --port, "{port}", --startup-ms, "3000"]
        env: {CUDA_VISIBLE_DEVICES: "{gpu}"}
        gpus: [0, 1]
        ports: 21000-21099
        stop_grace: 5s
      lifecycle: {warm_pool_size: 2, startup_timeout: 2m, drain_timeout: 10m}
      signals: {dcgm_url: "http://dcgm:9400/metrics"}
      policy:
        min_replicas: 1
        max_replicas: 6
        targets: {concurrency_per_replica: 16, kv_usage: 0.8}
        stable_window: 30s
        panic_window: 3s
        scale_down_stabilization: 2m
        scale_up: {max_step: 4}
        quiet_gaps: false
        schedule:
          - {days: [mon, tue, wed, thu, fri], from: "08:00", to: "18:30", min_replicas: 3}
    - model: mistral
      actuator:
        kind: kubernetes
        api_server: https://10.0.0.1:443
        namespace: llm
        deployment: mistral
        warm_deployment: mistral-warm
    - model: fixed
      actuator: {kind: static, endpoints: ["127.0.0.1:8001", "10.0.0.5:9000"]}
)";

std::shared_ptr<const ScalerConfig> parse(const std::string& text) {
  const auto root = YAML::Load(text);
  return parse_scaler_config(root["scaler"], "scaler");
}

TEST(ScalerConfig, ParsesAFullSection) {
  const auto c = parse(kFull);
  EXPECT_DOUBLE_EQ(c->tick_s, 0.5);
  ASSERT_EQ(c->pools.size(), 3u);
  const auto& p = c->pools[0];
  EXPECT_EQ(p.actuator, ActuatorKind::kProcess);
  EXPECT_EQ(p.replica_class, "h100");
  EXPECT_EQ(p.process.command.size(), 5u);
  EXPECT_EQ(p.process.env.at("CUDA_VISIBLE_DEVICES"), "{gpu}");
  EXPECT_EQ(p.process.port_from, 21000);
  EXPECT_EQ(p.process.port_to, 21099);
  EXPECT_EQ(p.lifecycle.warm_pool_size, 2);
  EXPECT_DOUBLE_EQ(p.lifecycle.startup_timeout_s, 120);
  EXPECT_EQ(p.signals.gpus, (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(p.policy.stable_window_s, 30);
  EXPECT_EQ(p.policy.scale_up_max_step, 4);
  EXPECT_FALSE(p.policy.quiet_gaps);
  EXPECT_TRUE(c->pools[1].policy.quiet_gaps);  // on by default
  EXPECT_DOUBLE_EQ(*p.policy.targets.kv_usage, 0.8);
  ASSERT_EQ(p.policy.schedule.size(), 1u);
  EXPECT_EQ(p.policy.schedule[0].days_mask, 0b0111110u);
  EXPECT_DOUBLE_EQ(p.policy.schedule[0].to_s, 18.5 * 3600);
  EXPECT_EQ(c->pools[1].kubernetes.warm_service, "mistral-warm");
  EXPECT_EQ(c->pools[1].replica_class, "kubernetes");
  ASSERT_EQ(c->pools[2].fixed.endpoints.size(), 2u);
  EXPECT_EQ(c->pools[2].fixed.endpoints[1].port, 9000);
}

struct Bad {
  const char* yaml;
  const char* key;
  int line;
};

TEST(ScalerConfig, RejectsBadInputNamingKeyAndLine) {
  const Bad cases[] = {
      {"scaler:\n  pools:\n    - model: a\n      actuator: {kind: static}\n      policy:\n        min_replicas: 5\n"
       "        max_replicas: 2\n",
       "scaler.pools[0].policy.min_replicas", 6},
      {"scaler:\n  pools:\n    - model: a\n      actuator: {kind: static}\n      policy:\n        stable_window: -5s\n",
       "scaler.pools[0].policy.stable_window", 6},
      {"scaler:\n  pools:\n    - model: a\n      actuator:\n        kind: docker\n",
       "scaler.pools[0].actuator.kind", 5},
      {"scaler:\n  pools:\n    - model: a\n      actuator: {kind: static}\n      policy:\n        min_replicas: 0\n",
       "scaler.pools[0].policy.min_replicas", 6},
      {"scaler:\n  pools:\n    - model: a\n      actuator: {kind: static}\n      policy:\n        panic_window: 2m\n",
       "scaler.pools[0].policy.panic_window", 6},
      {"scaler:\n  pools:\n    - model: a\n      actuator: {kind: static}\n      policy:\n        targets: {qeue: 3}\n",
       "scaler.pools[0].policy.targets.qeue", 6},
      {"scaler:\n  pools:\n    - model: a\n      actuator: {kind: process}\n", "scaler.pools[0].actuator.command", 4},
      {"scaler:\n  pools:\n    - model: a\n      actuator: {kind: process, command: x, ports: 9-3}\n",
       "scaler.pools[0].actuator.ports", 4},
      {"scaler:\n  pools:\n    - model: a\n      actuator: {kind: static}\n      policy:\n        schedule:\n"
       "          - {from: \"25:00\", to: \"01:00\", min_replicas: 2}\n",
       "scaler.pools[0].policy.schedule[0].from", 7},
      {"scaler:\n  pools:\n    - model: a\n      actuator: {kind: static}\n    - model: a\n      actuator: {kind: static}\n",
       "scaler.pools[1].model", 5},
      {"scaler:\n  pools:\n    - model: a\n      actuator: {kind: static}\n      lifecycle: {warm_pool_size: 1}\n"
       "      policy: {min_replicas: 2, max_replicas: 2}\n",
       "scaler.pools[0].lifecycle.warm_pool_size", 5},
      {"scaler:\n  pools:\n    - model: a\n      actuator: {kind: static}\n      policy:\n        quiet_gaps: sometimes\n",
       "scaler.pools[0].policy.quiet_gaps", 6},
      {"scaler:\n  pools:\n    - model: a\n      actuator: {kind: static}\n      signals: {missing_warn_every: 0s}\n",
       "scaler.pools[0].signals.missing_warn_every", 5},
  };
  for (const auto& c : cases) {
    try {
      parse(c.yaml);
      ADD_FAILURE() << "accepted: " << c.yaml;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), c.key) << e.what();
      EXPECT_EQ(e.line(), c.line) << e.what();
    }
  }
}

TEST(ScalerConfig, WarmReplicasCountWithinMaxReplicas) {
  const auto c = parse(kFull);
  EXPECT_EQ(c->pools[0].lifecycle.max_replicas, 6) << "the lifecycle's ceiling is the policy's maximum";
  EXPECT_DOUBLE_EQ(c->pools[0].signals.missing_warn_every_s, 300);
  try {
    parse("scaler:\n  pools:\n    - model: a\n      actuator: {kind: static}\n      lifecycle: {warm_pool_size: 1}\n"
          "      policy: {min_replicas: 2, max_replicas: 2}\n");
    ADD_FAILURE() << "max 2 + warm 1 would run three engines";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("within policy.max_replicas"), std::string::npos) << what;
    EXPECT_NE(what.find("raise max_replicas to 3"), std::string::npos) << what;
  }
  // A scale-to-zero pool may keep its whole maximum warm.
  EXPECT_NO_THROW(parse("scaler:\n  pools:\n    - model: a\n      actuator: {kind: static}\n"
                        "      lifecycle: {warm_pool_size: 1}\n      signals: {missing_warn_every: 10m}\n"
                        "      policy: {min_replicas: 0, max_replicas: 1, scale_to_zero: true}\n"));
}

TEST(ScalerConfig, PolicyAloneForTheReplayTool) {
  const auto root = YAML::Load("policy:\n  max_replicas: 3\n  stable_window: 20s\n");
  const auto p = parse_policy_config(root["policy"], "policy");
  EXPECT_EQ(p.max_replicas, 3);
  EXPECT_DOUBLE_EQ(p.stable_window_s, 20);
  EXPECT_THROW(parse_policy_config(YAML::Load("{max_replicas: -1}"), "policy"), ConfigError);
}

TEST(ScalerConfig, EmptySectionIsNoPools) { EXPECT_TRUE(parse("scaler: {}\n")->pools.empty()); }

}  // namespace
}  // namespace tidegate::scaler
