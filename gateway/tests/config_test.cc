#include <gtest/gtest.h>

#include "tidegate/common/config_error.h"
#include "tidegate/gateway/config.h"

using namespace tidegate;
using namespace tidegate::gateway;

namespace {
ConfigError error_of(const std::string& yaml) {
  try {
    parse_gateway_config_text(yaml);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for:\n" << yaml;
  return ConfigError("", 0, "");
}
const char* kGood = R"(listen: "127.0.0.1:18000"
threads: 2
limits: {max_body_bytes: 1MiB}
timeouts: {connect: 250ms, total: 2m}
access_log: {path: "", sample_rate: 0.5}
api_keys:
  - {name: ci, key: "sk-test-123456", tenant: acme, tags: {team: search, project: qa}}
models:
  - name: sim
    balancer: round_robin
    queue: {max_length: 5, max_wait: 2s}
    health: {path: /health, interval: 1s, failures_to_eject: 2}
    replicas:
      - {id: a, url: "http://127.0.0.1:18001", weight: 2, class: a100}
cache: {enabled: false, anything: [1, 2]}
scaler: {whatever: true}
)";
}  // namespace

TEST(GatewayConfig, ParsesEverything) {
  auto c = parse_gateway_config_text(kGood);
  EXPECT_EQ(c->listen_port, 18000);
  EXPECT_EQ(c->threads, 2);
  EXPECT_EQ(c->limits.max_body_bytes, 1024u * 1024u);
  EXPECT_DOUBLE_EQ(c->timeouts.connect_s, 0.25);
  EXPECT_DOUBLE_EQ(c->timeouts.total_s, 120);
  ASSERT_EQ(c->api_keys.size(), 1u);
  EXPECT_EQ(c->api_keys[0].tags.at("team"), "search");
  const auto* m = c->find_model("sim");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->balancer, BalancerKind::kRoundRobin);
  EXPECT_EQ(m->queue.max_length, 5u);
  EXPECT_DOUBLE_EQ(m->queue.max_wait_s, 2);
  ASSERT_EQ(m->replicas.size(), 1u);
  EXPECT_EQ(m->replicas[0].port, 18001);
  EXPECT_EQ(m->replicas[0].replica_class, "a100");
  EXPECT_TRUE(c->cache.IsMap());  // opaque sections are kept for their owners
  EXPECT_TRUE(c->scaler["whatever"].as<bool>());
}

// What an operator gets by leaving a key out: the defaults the README documents.
TEST(GatewayConfig, DefaultsForEverythingLeftOut) {
  auto c = parse_gateway_config_text(
      "models:\n  - name: m\n    replicas:\n      - {id: a, url: \"http://127.0.0.1:18001\"}\n");
  EXPECT_EQ(c->listen_host, "127.0.0.1");
  EXPECT_EQ(c->listen_port, 8080);
  EXPECT_EQ(c->threads, 0);  // one event loop per core
  EXPECT_EQ(c->max_retries, 2);
  EXPECT_EQ(c->limits.max_body_bytes, 8u * 1024u * 1024u);
  EXPECT_EQ(c->limits.max_header_bytes, 16u * 1024u);
  EXPECT_EQ(c->limits.max_connections, 10000u);
  EXPECT_DOUBLE_EQ(c->timeouts.header_read_s, 10);
  EXPECT_DOUBLE_EQ(c->timeouts.idle_s, 60);
  EXPECT_DOUBLE_EQ(c->timeouts.connect_s, 2);
  EXPECT_DOUBLE_EQ(c->timeouts.first_byte_s, 60);
  EXPECT_DOUBLE_EQ(c->timeouts.between_chunks_s, 30);
  EXPECT_DOUBLE_EQ(c->timeouts.total_s, 600);
  EXPECT_DOUBLE_EQ(c->access_log.sample_rate, 1.0);
  EXPECT_TRUE(c->api_keys.empty());  // open mode
  const auto* m = c->find_model("m");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->balancer, BalancerKind::kPrefixAware);
  EXPECT_EQ(m->max_concurrency_per_replica, 64);
  EXPECT_EQ(m->queue.max_length, 100u);
  EXPECT_DOUBLE_EQ(m->queue.max_wait_s, 30);
  EXPECT_DOUBLE_EQ(m->health.interval_s, 5);
  EXPECT_EQ(m->health.failures_to_eject, 3);
  EXPECT_DOUBLE_EQ(m->replicas[0].weight, 1.0);
}

TEST(GatewayConfig, ErrorsNameKeyAndLine) {
  auto e = error_of("listen: \"127.0.0.1:8080\"\nmodels:\n  - name: m\n    replicas:\n      - {id: a, url: \"ftp://x:1\"}\n");
  EXPECT_EQ(e.key(), "models[0].replicas[0].url");
  EXPECT_EQ(e.line(), 5);

  e = error_of("models:\n  - name: m\n    balancr: round_robin\n");
  EXPECT_EQ(e.key(), "models[0].balancr");  // unknown keys are rejected
  EXPECT_EQ(e.line(), 3);

  e = error_of("listen: \"127.0.0.1:8080\"\ntimeouts:\n  connect: soon\nmodels: [{name: m}]\n");
  EXPECT_EQ(e.key(), "timeouts.connect");
  EXPECT_EQ(e.line(), 3);

  e = error_of("models:\n  - {name: m}\n  - {name: m}\n");
  EXPECT_EQ(e.key(), "models[1].name");
  EXPECT_EQ(e.line(), 3);

  e = error_of("listen: \"nohost\"\nmodels: [{name: m}]\n");
  EXPECT_EQ(e.key(), "listen");

  e = error_of("api_keys:\n  - {name: a, key: short}\nmodels: [{name: m}]\n");
  EXPECT_EQ(e.key(), "api_keys[0].key");
  EXPECT_EQ(std::string(e.what()).find("short"), std::string::npos);  // secrets stay out of messages

  e = error_of("models: []\n");
  EXPECT_EQ(e.key(), "models");
}

// The cache, scaler and cost sections are parsed by their own areas, whose errors name the
// line: the nodes handed to them must still carry their marks (a clone said "line 1").
TEST(GatewayConfig, OpaqueSectionsKeepTheirLineNumbers) {
  auto c = parse_gateway_config_text(std::string(kGood) + "cost:\n  data_dir: x\n  models: {sim: a100}\n");
  EXPECT_EQ(c->cache["anything"].Mark().line + 1, 15);
  EXPECT_EQ(c->scaler["whatever"].Mark().line + 1, 16);
  EXPECT_EQ(c->cost["models"].Mark().line + 1, 19);
  auto none = parse_gateway_config_text("models:\n  - {name: m, replicas: []}\n");
  EXPECT_FALSE(none->cache.IsDefined() && !none->cache.IsNull());
}

TEST(GatewayConfig, UpstreamKeysAndBodyCap) {
  auto c = parse_gateway_config_text(R"(listen: "127.0.0.1:0"
limits: {max_upstream_body_bytes: 2MiB}
models:
  - name: m
    replica_api_key: "sk-model"
    replicas:
      - {id: a, url: "http://127.0.0.1:1", api_key: "sk-replica"}
      - {id: b, url: "http://127.0.0.1:2"}
)");
  EXPECT_EQ(c->limits.max_upstream_body_bytes, 2u * 1024 * 1024);
  EXPECT_EQ(c->models[0].replica_api_key, "sk-model");
  EXPECT_EQ(c->models[0].replicas[0].api_key, "sk-replica");
  EXPECT_EQ(c->models[0].replicas[1].api_key, "");
  EXPECT_EQ(parse_gateway_config_text(kGood)->limits.max_upstream_body_bytes, 64u * 1024 * 1024);
  const auto e = error_of("listen: \"127.0.0.1:0\"\nlimits: {max_upstream_body_bytes: 10}\nmodels: [{name: m}]\n");
  EXPECT_EQ(e.key(), "limits.max_upstream_body_bytes");
  EXPECT_EQ(e.line(), 2);
}

TEST(GatewayConfig, PrefixRoutingAndSessionAffinity) {
  const auto c = parse_gateway_config_text(R"(listen: "127.0.0.1:18000"
models:
  - name: m
    balancer: prefix_aware
    prefix_routing: {block_bytes: 256, kv_tokens_per_replica: 100000, load_bound: 1.5, max_prompt_bytes: 64KiB}
    session_affinity: {header: X-Session-Id, use_user: true, max_sessions: 500}
  - name: plain
)");
  const auto& m = c->models[0];
  EXPECT_EQ(m.balancer, BalancerKind::kPrefixAware);
  EXPECT_EQ(m.prefix.block_bytes, 256u);
  EXPECT_EQ(m.prefix.max_prompt_bytes, 64u * 1024);
  EXPECT_DOUBLE_EQ(m.prefix.load_bound, 1.5);
  EXPECT_EQ(m.prefix.index_blocks(), 100000u * 4 / 256);  // kv tokens x 4 bytes / block
  EXPECT_EQ(m.affinity.header, "x-session-id");           // header names compare lower-cased
  EXPECT_TRUE(m.affinity.use_user);
  EXPECT_EQ(m.affinity.max_sessions, 500u);
  const auto& d = c->models[1];  // defaults
  EXPECT_EQ(d.balancer, BalancerKind::kPrefixAware);
  EXPECT_EQ(d.prefix.block_bytes, 512u);
  EXPECT_EQ(d.prefix.index_blocks(), 400000u * 4 / 512);
  EXPECT_FALSE(d.affinity.enabled());

  auto e = error_of("models:\n  - name: m\n    prefix_routing: {load_bound: 0.5}\n");
  EXPECT_EQ(e.key(), "models[0].prefix_routing.load_bound");
  EXPECT_EQ(e.line(), 3);
  e = error_of("models:\n  - name: m\n    prefix_routing:\n      block_bytes: 8\n");
  EXPECT_EQ(e.key(), "models[0].prefix_routing.block_bytes");
  EXPECT_EQ(e.line(), 4);
  e = error_of("models:\n  - name: m\n    session_affinity: {header: \"x session\"}\n");
  EXPECT_EQ(e.key(), "models[0].session_affinity.header");
  e = error_of("models:\n  - name: m\n    session_affinity: {max_sessions: 5}\n");
  EXPECT_EQ(e.key(), "models[0].session_affinity");
  e = error_of("models:\n  - name: m\n    balancer: prefix_awre\n");
  EXPECT_EQ(e.key(), "models[0].balancer");
  EXPECT_NE(std::string(e.what()).find("prefix_aware"), std::string::npos);
}
