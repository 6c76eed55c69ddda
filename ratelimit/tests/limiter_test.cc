// The limiter alone (local windows) and shared by two limiters through a real redis-server.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <thread>

#include "redis_server.h"
#include "tidegate/ratelimit/limiter.h"
#include "tidegate/redis/loop.h"
#include "tidegate/redis/shared_totals.h"
#include "tidegate/testing/metrics.h"

namespace tidegate::ratelimit {
namespace {

using namespace std::chrono_literals;
using tidegate::testing::RedisServer;

// 2026-12-03T10:00:10Z: 50 s left in its minute.
constexpr double kT = 1796292010.0;

std::shared_ptr<const RateLimitConfig> rules(const std::string& yaml) {
  return parse_rate_limits(YAML::Load(yaml), "rate_limits");
}

double rejections(prometheus::Registry& r, const std::string& limit) {
  return testing::metric_sum(r, "tidegate_rate_limit_rejections_total", "limit", limit);
}

TEST(RateLimiter, RequestsPerMinuteRefuseWithTheLimitNamedAndTheTimeLeft) {
  prometheus::Registry registry;
  auto limiter = make_rate_limiter(rules("- {scope: 'tenant:acme', requests_per_minute: 3}"), nullptr, &registry);
  const Subject acme{"k1", "acme", "m"};
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter->admit(acme, kT + i).allowed) << i;
  const auto d = limiter->admit(acme, kT + 3);
  ASSERT_FALSE(d.allowed);
  EXPECT_EQ(d.scope, "tenant:acme");
  EXPECT_EQ(d.limit, "requests_per_minute");
  EXPECT_DOUBLE_EQ(d.retry_after_s, 47);  // 10:00:13 -> 10:01:00
  EXPECT_NE(d.message.find("3 requests per minute"), std::string::npos) << d.message;
  EXPECT_TRUE(limiter->admit({"k2", "globex", "m"}, kT + 3).allowed) << "other tenants are not limited";
  EXPECT_TRUE(limiter->admit(acme, kT + 50).allowed) << "a new minute";
  EXPECT_EQ(rejections(registry, "requests_per_minute"), 1);
}

TEST(RateLimiter, TokensAreChargedFromUsageToTheMinuteTheRequestArrivedIn) {
  prometheus::Registry registry;
  auto limiter = make_rate_limiter(rules("- {scope: 'model:m', tokens_per_minute: 100}"), nullptr, &registry);
  const Subject s{"k1", "acme", "m"};
  ASSERT_TRUE(limiter->admit(s, kT).allowed);
  limiter->charge_tokens(s, kT, 80);
  ASSERT_TRUE(limiter->admit(s, kT + 1).allowed);  // 80 < 100: the next one may start
  limiter->charge_tokens(s, kT + 1, 30);
  const auto d = limiter->admit(s, kT + 2);
  ASSERT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, "tokens_per_minute");
  EXPECT_DOUBLE_EQ(d.used, 110);
  EXPECT_NE(d.message.find("100 tokens per minute"), std::string::npos) << d.message;
  // A late charge to the previous minute does not touch the new one.
  EXPECT_TRUE(limiter->admit(s, kT + 55).allowed);
  limiter->charge_tokens(s, kT + 2, 500);
  EXPECT_TRUE(limiter->admit(s, kT + 56).allowed);
  EXPECT_EQ(rejections(registry, "tokens_per_minute"), 1);
}

TEST(RateLimiter, WildcardsCountEachKeySeparatelyAndEveryMatchingLimitApplies) {
  auto limiter = make_rate_limiter(rules("- {scope: 'key:*', requests_per_minute: 2}\n"
                                         "- {scope: 'tenant:acme', requests_per_minute: 3}"),
                                   nullptr, nullptr);
  EXPECT_TRUE(limiter->admit({"a", "acme", "m"}, kT).allowed);
  EXPECT_TRUE(limiter->admit({"a", "acme", "m"}, kT).allowed);
  EXPECT_EQ(limiter->admit({"a", "acme", "m"}, kT).scope, "key:a");
  EXPECT_TRUE(limiter->admit({"b", "acme", "m"}, kT).allowed);
  const auto d = limiter->admit({"b", "acme", "m"}, kT);  // key b has room, tenant acme has not
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.scope, "tenant:acme");
  EXPECT_TRUE(limiter->admit({"c", "globex", "m"}, kT).allowed);
}

bool eventually(const std::function<bool()>& pred) {
  for (int i = 0; i < 300; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

// Waits for a minute with at least `need` seconds left, so a test's requests share one window.
void wait_for_room_in_minute(double need);

// Two gateways' limiters on one Redis.
struct SharedPair {
  SharedPair() {
    started = server.start();
    auto rc = std::make_shared<redis::RedisConfig>();
    rc->port = static_cast<std::uint16_t>(server.port());
    rc->reconnect_min_s = 0.02;
    rc->reconnect_max_s = 0.1;
    rc->refresh_interval_s = 0.02;
    rc->command_timeout_s = 0.2;
    rc->expected_gateways = 2;
    for (int i = 0; i < 2; ++i) {
      clients[i] = redis::make_client(rc, loop.executor(), nullptr);
      clients[i]->start();
      totals[i] = make_redis_windows(clients[i], rc, &registries[i]);
      limiters[i] = make_rate_limiter(rules("- {scope: 'tenant:acme', requests_per_minute: 6}"), totals[i], nullptr);
    }
  }
  static double now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  bool admit(int i) { return limiters[i]->admit({"k", "acme", "m"}, now()).allowed; }
  bool healthy(int i) { return totals[i]->view("probe", 0).healthy; }
  // Redis has acknowledged everything this gateway counted.
  double unacknowledged(int i) { return testing::metric_sum(registries[i], "tidegate_shared_state_unacknowledged"); }
  bool acknowledged(int i) { return unacknowledged(i) == 0; }
  // Gateway i has read back, from Redis, a fleet total of `n` requests in this minute.
  bool fleet_reads(int i, double n) {
    const auto window = static_cast<long long>(std::floor((now() + totals[i]->clock_offset()) / 60));
    const auto v = totals[i]->view("tenant:acme/rpm/" + std::to_string(window), 0);
    return v.fleet && *v.fleet == n;
  }
  bool both_read(double n) { return fleet_reads(0, n) && fleet_reads(1, n); }
  // Both connected, and 5 s of the minute left.
  bool ready() {
    if (!started || !eventually([&] { return healthy(0) && healthy(1); })) return false;
    wait_for_room_in_minute(5);
    return true;
  }

  RedisServer server;
  bool started = false;
  prometheus::Registry registries[2];
  redis::Loop loop;
  std::shared_ptr<redis::Client> clients[2];
  std::shared_ptr<redis::SharedTotals> totals[2];
  std::shared_ptr<RateLimiter> limiters[2];
};

void wait_for_room_in_minute(double need) {
  const double now = SharedPair::now();
  const double left = 60 - std::fmod(now, 60);
  if (left < need) std::this_thread::sleep_for(std::chrono::duration<double>(left + 0.05));
}

TEST(SharedRateLimiter, TwoGatewaysShareOneLimit) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  SharedPair p;
  ASSERT_TRUE(p.ready());
  int admitted = 0;
  for (int i = 0; i < 12; ++i) {
    admitted += p.admit(i % 2) ? 1 : 0;
    // Redis has the count, and a refresh has read it back to the other gateway.
    ASSERT_TRUE(eventually([&] { return p.acknowledged(0) && p.acknowledged(1) && p.both_read(admitted); }));
  }
  EXPECT_EQ(admitted, 6) << "alone, each would have admitted 6";
}

TEST(SharedRateLimiter, RedisDownMeansEachGatewayTakesItsShare) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  SharedPair p;
  ASSERT_TRUE(p.ready());
  ASSERT_TRUE(p.admit(0));
  ASSERT_TRUE(p.admit(1));
  // Both counts acknowledged (one Redis has not confirmed would count twice below) and read
  // back by both gateways: 2 of 6 used.
  ASSERT_TRUE(eventually([&] { return p.acknowledged(0) && p.acknowledged(1) && p.both_read(2); }));
  p.server.kill(SIGKILL);
  ASSERT_TRUE(eventually([&] { return !p.healthy(0) && !p.healthy(1); }));
  int admitted[2] = {0, 0};
  for (int i = 0; i < 10; ++i)
    for (int g = 0; g < 2; ++g) admitted[g] += p.admit(g) ? 1 : 0;
  EXPECT_EQ(admitted[0], 2) << "4 remained for 2 gateways";
  EXPECT_EQ(admitted[1], 2);
  // What each admitted while Redis was down is what the waits above read as 0.
  EXPECT_EQ(p.unacknowledged(0), 2);
  EXPECT_EQ(p.unacknowledged(1), 2);
}

}  // namespace
}  // namespace tidegate::ratelimit
