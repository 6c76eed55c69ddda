#include <gtest/gtest.h>

#include "test_util.h"
#include "tidegate/common/config_error.h"

namespace tidegate::cost {
namespace {

using testing::config_from;

ConfigError expect_error(const std::string& yaml) {
  try {
    config_from(yaml);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError for:\n" << yaml;
  return ConfigError("", 0, "");
}

TEST(CostConfig, FullSectionParses) {
  const auto c = config_from(R"(
data_dir: /tmp/x
replica_classes:
  h100-spot:
    usd_per_hour: 2.0
    state_fraction: {starting: 1.0, warm: 0.5, standby: 0.1}
    state_usd_per_hour: {draining: 0.25}
models: {llama: h100-spot}
api_models:
  gpt-4o: {input_usd_per_1m: 2.5, output_usd_per_1m: 10}
attribution: {w_prefill: 1, w_decode: 5}
cache_lookup_usd: 0.00002
tags: {labels: [team, project], values: {team: [ml, search]}, max_values: 5}
budgets:
  - {scope: "tenant:acme", period: day, soft_usd: 5, hard_usd: 10}
  - {scope: "tag:team=infra", period: month, hard_usd: 100}
alerts: {webhook_url: "http://127.0.0.1:9/hook", webhook_timeout: 500ms}
reporting: {bucket: 30s, horizon: 2d, idle_hint_fraction: 0.2}
)");
  const auto& cls = c->replica_classes.at("h100-spot");
  EXPECT_DOUBLE_EQ(cls.usd_per_second[static_cast<int>(ReplicaState::kActive)], 2.0 / 3600);
  EXPECT_DOUBLE_EQ(cls.usd_per_second[static_cast<int>(ReplicaState::kWarm)], 1.0 / 3600);
  EXPECT_DOUBLE_EQ(cls.usd_per_second[static_cast<int>(ReplicaState::kDraining)], 0.25 / 3600);
  EXPECT_DOUBLE_EQ(cls.usd_per_second[static_cast<int>(ReplicaState::kStopped)], 0.0);
  EXPECT_DOUBLE_EQ(cls.usd_per_second[static_cast<int>(ReplicaState::kStandby)], 0.2 / 3600);  // the sleeping tier
  EXPECT_EQ(c->model_classes.at("llama"), "h100-spot");
  EXPECT_DOUBLE_EQ(c->api_models.at("gpt-4o").output_usd_per_1m, 10);
  EXPECT_DOUBLE_EQ(c->w_decode, 5);
  EXPECT_EQ(c->budgets.size(), 2u);
  EXPECT_EQ(scope_name(c->budgets[1]), "tag:team=infra");
  // A budget on a tag value admits that value to the fixed list, or it could never match.
  EXPECT_TRUE(c->tags.values.at("team").count("infra"));
  EXPECT_DOUBLE_EQ(c->bucket_s, 30);
  EXPECT_DOUBLE_EQ(c->webhook_timeout_s, 0.5);
}

TEST(CostConfig, DefaultsWeighDecodeAboveKPrefill) {
  const auto c = config_from("{}");
  EXPECT_DOUBLE_EQ(c->w_prefill, 1.0);
  EXPECT_DOUBLE_EQ(c->w_decode, 4.0);
  EXPECT_TRUE(c->budgets.empty());
}

TEST(CostConfig, MissingPriceNamesKeyAndLine) {
  const auto e = expect_error("replica_classes:\n  gpu:\n    state_fraction: {warm: 1}\n");
  EXPECT_EQ(e.key(), "cost.replica_classes.gpu.usd_per_hour");
  EXPECT_EQ(e.line(), 3);
}

TEST(CostConfig, NegativePricesRejected) {
  EXPECT_EQ(expect_error("replica_classes:\n  gpu: {usd_per_hour: -1}\n").key(), "cost.replica_classes.gpu.usd_per_hour");
  EXPECT_EQ(expect_error("replica_classes:\n  gpu: {usd_per_hour: 1, state_fraction: {warm: -0.5}}\n").key(),
            "cost.replica_classes.gpu.state_fraction.warm");
  const auto e = expect_error("api_models:\n  m:\n    input_usd_per_1m: 1\n    output_usd_per_1m: -3\n");
  EXPECT_EQ(e.key(), "cost.api_models.m.output_usd_per_1m");
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(expect_error("api_models:\n  m: {input_usd_per_1m: 1}\n").key(), "cost.api_models.m.output_usd_per_1m");
}

TEST(CostConfig, UnknownReplicaClassRejected) {
  const auto e = expect_error("replica_classes:\n  gpu: {usd_per_hour: 1}\nmodels:\n  llama: tpu\n");
  EXPECT_EQ(e.key(), "cost.models.llama");
  EXPECT_EQ(e.line(), 4);
  EXPECT_NE(std::string(e.what()).find("tpu"), std::string::npos);
}

TEST(CostConfig, BadInputsRejected) {
  EXPECT_EQ(expect_error("replica_classes:\n  gpu: {usd_per_hour: 1, state: {}}\n").key(), "cost.replica_classes.gpu.state");
  EXPECT_EQ(expect_error("replica_classes:\n  gpu: {usd_per_hour: 1, state_fraction: {warm: 1}, "
                         "state_usd_per_hour: {warm: 1}}\n").key(),
            "cost.replica_classes.gpu.state_usd_per_hour.warm");
  EXPECT_EQ(expect_error("budgets:\n  - {scope: 'team:x', hard_usd: 1}\n").key(), "cost.budgets[0].scope");
  EXPECT_EQ(expect_error("budgets:\n  - {scope: 'tag:team=x', hard_usd: 1}\n").key(), "cost.budgets[0].scope");
  EXPECT_EQ(expect_error("budgets:\n  - {scope: 'tenant:a', period: week, hard_usd: 1}\n").key(), "cost.budgets[0].period");
  EXPECT_EQ(expect_error("budgets:\n  - {scope: 'tenant:a', soft_usd: 5, hard_usd: 1}\n").key(), "cost.budgets[0].soft_usd");
  EXPECT_EQ(expect_error("budgets:\n  - {scope: 'tenant:a'}\n").key(), "cost.budgets[0]");
  EXPECT_EQ(expect_error("tags: {labels: [model]}\n").key(), "cost.tags.labels[0]");
  EXPECT_EQ(expect_error("tags: {labels: ['bad-name']}\n").key(), "cost.tags.labels[0]");
  EXPECT_EQ(expect_error("alerts: {webhook_url: 'https://x'}\n").key(), "cost.alerts.webhook_url");
  EXPECT_EQ(expect_error("attribution: {w_prefill: 0, w_decode: 0}\n").key(), "cost.attribution");
  EXPECT_EQ(expect_error("attribution: {w_prefill: 1, w_cached_prompt: 2}\n").key(), "cost.attribution.w_cached_prompt");
  EXPECT_EQ(expect_error("prices: {}\n").key(), "cost.prices");
}

}  // namespace
}  // namespace tidegate::cost
