// Budgets shared by several gateways through a real redis-server on loopback: one hard limit for
// the fleet, degraded enforcement at 1/N of what remains while Redis is down, no committed spend
// lost when Redis is killed and restarted (with and without its append-only file), and no double
// count when a gateway restarts from its own journal.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <thread>

#include "redis_server.h"
#include "test_util.h"
#include "tidegate/cost/shared_spend.h"
#include "tidegate/redis/client.h"
#include "tidegate/redis/loop.h"

namespace tidegate::cost {
namespace {

using namespace std::chrono_literals;
using tidegate::testing::RedisServer;

double now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

std::string today() {
  const auto t = static_cast<std::time_t>(now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit = 3000ms) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

// Each request on model "paid" costs $1 (one prompt token at $1M per 1M tokens).
std::string config_text(double hard_usd, const std::string& data_dir = "") {
  return "api_models:\n  paid: {input_usd_per_1m: 1000000, output_usd_per_1m: 0}\n"
         "budgets:\n  - {scope: 'tenant:acme', period: day, hard_usd: " + std::to_string(hard_usd) + "}\n" +
         (data_dir.empty() ? "" : "data_dir: '" + data_dir + "'\n");
}

// One gateway's cost accounting publishing to Redis, on its own Redis loop, taken down in the
// gateway's order: the loop stops before the registry its handlers update goes.
struct Gateway {
  Gateway(const RedisServer& server, double hard_usd, int expected = 1,
          const std::string& data_dir = "") {
    auto rc = std::make_shared<redis::RedisConfig>();
    rc->port = static_cast<std::uint16_t>(server.port());
    rc->command_timeout_s = 0.2;
    rc->reconnect_min_s = 0.02;
    rc->reconnect_max_s = 0.1;
    rc->refresh_interval_s = 0.02;
    rc->expected_gateways = expected;
    client = redis::make_client(rc, loop.executor(), nullptr);
    client->start();
    const auto cost = testing::config_from(config_text(hard_usd, data_dir));
    accounting = make_cost_accounting(cost, registry, make_redis_shared_spend(client, rc, *cost, &registry));
  }
  // One $1 request if the budget admits it.
  bool request() {
    const RequestLabels acme{"paid", "acme", "k1", {}};
    const double t = now();
    if (!accounting->check_budget(acme, t).allowed) return false;
    const auto h = accounting->request_started(acme, "upstream", t);
    accounting->request_progress(h, 1, 0, t);
    accounting->request_finished(h, t);
    return true;
  }
  double degraded() { return testing::metric_sum(registry, "tidegate_shared_state_degraded"); }
  double disagreement() { return testing::metric_sum(registry, "tidegate_budget_config_disagreement"); }
  double unacknowledged() { return testing::metric_sum(registry, "tidegate_shared_state_unacknowledged"); }

  ~Gateway() { loop.stop(); }

  redis::Loop loop;  // first: destroyed last
  prometheus::Registry registry;
  std::shared_ptr<redis::Client> client;
  std::unique_ptr<CostAccounting> accounting;
};

std::string fleet_sum(const RedisServer& s) { return s.call({"GET", "tidegate:budgets:tenant:acme/day/" + today()}); }
bool sum_is(const RedisServer& s, double usd) {
  const auto v = fleet_sum(s);
  return !v.empty() && std::abs(std::stod(v) - usd) < 1e-9;
}

TEST(SharedBudgets, TwoGatewaysEnforceOneHardLimit) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  RedisServer server;
  ASSERT_TRUE(server.start());
  Gateway a(server, 5), b(server, 5);
  ASSERT_TRUE(eventually([&] { return a.degraded() == 0 && b.degraded() == 0; }));
  int admitted = 0;
  for (int i = 0; i < 10; ++i) {
    admitted += (i % 2 ? a : b).request() ? 1 : 0;
    // Each gateway sees the other's spend once its refresh read it (20 ms here).
    ASSERT_TRUE(eventually([&] { return sum_is(server, admitted); }));
    std::this_thread::sleep_for(60ms);
  }
  EXPECT_EQ(admitted, 5) << "alone, each gateway would have admitted 5";
  EXPECT_TRUE(sum_is(server, 5)) << fleet_sum(server);
  // The spend gauge shows the fleet's $5 on both, though each charged only part of it.
  ASSERT_FALSE(a.request());  // a check refreshes the gauge
  EXPECT_EQ(testing::metric_sum(a.registry, "tidegate_budget_spend_usd"), 5);
  EXPECT_EQ(testing::metric_sum(b.registry, "tidegate_budget_spend_usd"), 5);
  // The hard-limit alert fired, though neither gateway's own spend reached $5.
  EXPECT_GE(testing::metric_sum(a.registry, "tidegate_budget_alerts_total", "level", "hard") +
                testing::metric_sum(b.registry, "tidegate_budget_alerts_total", "level", "hard"),
            1);
}

TEST(SharedBudgets, RedisDownMeansEachGatewayTakesItsShareOfWhatRemainsAndNothingIsLost) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  RedisServer server;  // append-only, fsync always
  ASSERT_TRUE(server.start());
  Gateway a(server, 10, /*expected=*/2);
  ASSERT_TRUE(eventually([&] { return a.degraded() == 0; }));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(a.request());
  // Redis holds the $4 and the gateway has its acknowledgement: were one still unconfirmed when
  // Redis died, it would count twice below (Redis may or may not have it), and leave $2.
  ASSERT_TRUE(eventually([&] { return sum_is(server, 4) && a.unacknowledged() == 0; }));

  server.kill(SIGKILL);
  ASSERT_TRUE(eventually([&] { return a.degraded() == 1; }));
  // $6 remained for 2 gateways: this one takes $3 of it alone.
  int admitted = 0;
  for (int i = 0; i < 10; ++i) admitted += a.request() ? 1 : 0;
  EXPECT_EQ(admitted, 3);
  EXPECT_EQ(a.unacknowledged(), 3) << "the spend while Redis was down";

  ASSERT_TRUE(server.start());  // same port and append-only file
  ASSERT_TRUE(eventually([&] { return a.degraded() == 0; }));
  EXPECT_TRUE(eventually([&] { return sum_is(server, 7) && a.unacknowledged() == 0; }))
      << "spend while down was not pushed: " << fleet_sum(server) << ", unacknowledged " << a.unacknowledged();
}

TEST(SharedBudgets, ARedisThatLostItsDataIsRebuiltFromTheGatewaysLedgers) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  RedisServer server(/*appendonly=*/false);  // a restart comes back empty
  ASSERT_TRUE(server.start());
  Gateway a(server, 100), b(server, 100);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a.request());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(b.request());
  ASSERT_TRUE(eventually([&] { return sum_is(server, 5); }));

  server.kill(SIGKILL);
  ASSERT_TRUE(server.start());
  EXPECT_TRUE(eventually([&] { return sum_is(server, 5); })) << fleet_sum(server);
}

TEST(SharedBudgets, ARestartedGatewayRepublishesUnderItsOwnIdWithoutDoubleCounting) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  RedisServer server;
  ASSERT_TRUE(server.start());
  const auto dir = std::filesystem::temp_directory_path() / ("tidegate-shared-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    Gateway a(server, 100, 1, dir.string());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(a.request());
    ASSERT_TRUE(eventually([&] { return sum_is(server, 3); }));
    a.accounting->flush();
  }
  Gateway again(server, 100, 1, dir.string());
  ASSERT_TRUE(eventually([&] { return again.degraded() == 0; }));
  ASSERT_TRUE(again.request());
  EXPECT_TRUE(eventually([&] { return sum_is(server, 4); })) << fleet_sum(server);
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(sum_is(server, 4)) << "the restored $3 was counted twice: " << fleet_sum(server);
  std::filesystem::remove_all(dir);
}

TEST(SharedBudgets, GatewaysWithDifferentBudgetsAreReported) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  RedisServer server;
  ASSERT_TRUE(server.start());
  Gateway a(server, 5), same(server, 5);
  ASSERT_TRUE(eventually([&] { return a.degraded() == 0 && same.degraded() == 0; }));
  std::this_thread::sleep_for(1200ms);  // a check each has compared the other's fingerprint
  EXPECT_EQ(a.disagreement(), 0);
  EXPECT_EQ(same.disagreement(), 0);
  Gateway other(server, 6);  // a config rolled out to one replica only
  EXPECT_TRUE(eventually([&] { return other.disagreement() == 1 && a.disagreement() == 1; }));
}

}  // namespace
}  // namespace tidegate::cost
