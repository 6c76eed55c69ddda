#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>

#include "tidegate/common/config_error.h"
#include "tidegate/redis/config.h"

namespace tidegate::redis {
namespace {

std::shared_ptr<const RedisConfig> parse(const std::string& text) {
  const auto root = YAML::Load(text);
  return parse_redis_config(root["redis"], "redis");
}

void expect_error(const std::string& text, const std::string& key, int line, const std::string& fragment) {
  try {
    parse(text);
    FAIL() << "accepted: " << text;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_EQ(e.line(), line) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(RedisConfig, ParsesEveryKey) {
  const auto c = parse(
      "redis:\n  address: 10.0.0.5:6380\n  key_prefix: fleet-a\n  command_timeout: 20ms\n"
      "  connect_timeout: 1s\n  reconnect_min: 50ms\n  reconnect_max: 2s\n  refresh_interval: 250ms\n"
      "  expected_gateways: 3\n  cache_stream_max_len: 500\n  routing_stream_max_len: 700\n");
  EXPECT_EQ(c->host, "10.0.0.5");
  EXPECT_EQ(c->port, 6380);
  EXPECT_EQ(c->key_prefix, "fleet-a");
  EXPECT_DOUBLE_EQ(c->command_timeout_s, 0.02);
  EXPECT_DOUBLE_EQ(c->connect_timeout_s, 1.0);
  EXPECT_DOUBLE_EQ(c->reconnect_min_s, 0.05);
  EXPECT_DOUBLE_EQ(c->reconnect_max_s, 2.0);
  EXPECT_DOUBLE_EQ(c->refresh_interval_s, 0.25);
  EXPECT_EQ(c->expected_gateways, 3);
  EXPECT_EQ(c->cache_stream_max_len, 500u);
  EXPECT_EQ(c->routing_stream_max_len, 700u);
}

TEST(RedisConfig, DefaultsWhenOnlyTheAddressIsGiven) {
  const auto c = parse("redis:\n  address: redis.default.svc:6379\n");
  EXPECT_EQ(c->host, "redis.default.svc");
  EXPECT_EQ(c->key_prefix, "tidegate");
  EXPECT_DOUBLE_EQ(c->command_timeout_s, 0.05);
  EXPECT_EQ(c->expected_gateways, 1);
}

TEST(RedisConfig, ThePasswordComesFromTheEnvironment) {
  ::setenv("TIDEGATE_TEST_REDIS_PASSWORD", "s3cret", 1);
  EXPECT_EQ(parse("redis:\n  address: a:1\n  password_env: TIDEGATE_TEST_REDIS_PASSWORD\n")->password, "s3cret");
  ::unsetenv("TIDEGATE_TEST_REDIS_PASSWORD");
  expect_error("redis:\n  address: a:1\n  password_env: TIDEGATE_TEST_REDIS_PASSWORD\n", "redis.password_env", 3,
               "'TIDEGATE_TEST_REDIS_PASSWORD' is not set");
  EXPECT_EQ(parse("redis:\n  address: a:1\n")->password, "");
}

TEST(RedisConfig, BadValuesNameTheKeyAndLine) {
  expect_error("redis:\n  address: localhost\n", "redis.address", 2, "host:port");
  expect_error("redis:\n  address: localhost:99999\n", "redis.address", 2, "65535");
  expect_error("redis:\n  address: localhost:-1\n", "redis.address", 2, "port");
  expect_error("redis:\n  address: a:1\n  command_timeout: 0s\n", "redis.command_timeout", 3, "more than 0");
  expect_error("redis:\n  address: a:1\n  reconnect_min: 2s\n  reconnect_max: 1s\n", "redis.reconnect_max", 4,
               "reconnect_min");
  expect_error("redis:\n  address: a:1\n  expected_gateways: 0\n", "redis.expected_gateways", 3, "");
  expect_error("redis:\n  address: a:1\n  key_prefix: 'a b'\n", "redis.key_prefix", 3, "whitespace");
  expect_error("redis:\n  adress: a:1\n", "redis.adress", 2, "");
  expect_error("redis: yes\n", "redis", 1, "mapping");
}

}  // namespace
}  // namespace tidegate::redis
