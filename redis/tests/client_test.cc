// The client against a real redis-server on loopback: replies, an outage at start, a SIGKILL
// mid-run, a stalled server (SIGSTOP), and stop() with commands in flight.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "redis_server.h"
#include "tidegate/redis/client.h"
#include "tidegate/redis/loop.h"

namespace tidegate::redis {
namespace {

using namespace std::chrono_literals;
using testing::RedisServer;

std::shared_ptr<RedisConfig> config_for(const RedisServer& s) {
  auto c = std::make_shared<RedisConfig>();
  c->port = static_cast<std::uint16_t>(s.port());
  c->command_timeout_s = 0.2;
  c->connect_timeout_s = 0.3;
  c->reconnect_min_s = 0.02;
  c->reconnect_max_s = 0.1;
  return c;
}

// Runs one command and waits (bounded) for its callback.
Result run(Client& c, std::vector<std::string> args, double timeout_s = -1) {
  auto p = std::make_shared<std::promise<Result>>();
  auto f = p->get_future();
  c.command(std::move(args), [p](Result r) { p->set_value(std::move(r)); }, timeout_s);
  if (f.wait_for(5s) != std::future_status::ready) {
    ADD_FAILURE() << "callback not called within 5 s";
    return {};
  }
  return f.get();
}

bool wait_health(const Client& c, Health h, std::chrono::milliseconds limit = 3000ms) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (c.health() == h) return true;
    std::this_thread::sleep_for(5ms);
  }
  return c.health() == h;
}

// A started server, a loop and a client connected to it.
struct Connected {
  explicit Connected(std::function<void(RedisConfig&)> tune = {}, prometheus::Registry* registry = nullptr) {
    started = server.start();
    auto cfg = config_for(server);
    if (tune) tune(*cfg);
    client = make_client(cfg, loop.executor(), registry);
  }
  bool up() {
    client->start();
    return started && wait_health(*client, Health::kUp);
  }
  RedisServer server;
  bool started = false;
  Loop loop;
  std::shared_ptr<Client> client;
};

TEST(RedisClient, RepliesOfEveryType) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  prometheus::Registry registry;  // outlives the loop, whose handlers update its series
  Connected c({}, &registry);
  ASSERT_TRUE(c.up());
  auto& client = c.client;

  EXPECT_EQ(run(*client, {"SET", "k", std::string("a\0b", 3)}).reply.str, "OK");
  const auto got = run(*client, {"GET", "k"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.reply.type, Reply::Type::kString);
  EXPECT_EQ(got.reply.str, std::string("a\0b", 3));  // binary-safe
  EXPECT_DOUBLE_EQ(run(*client, {"INCRBYFLOAT", "f", "0.25"}).reply.number(), 0.25);
  EXPECT_DOUBLE_EQ(run(*client, {"INCRBYFLOAT", "f", "0.5"}).reply.number(), 0.75);
  EXPECT_EQ(run(*client, {"INCR", "i"}).reply.integer, 1);
  const auto arr = run(*client, {"MGET", "f", "missing"});
  ASSERT_EQ(arr.reply.type, Reply::Type::kArray);
  ASSERT_EQ(arr.reply.elements.size(), 2u);
  EXPECT_EQ(arr.reply.elements[1].type, Reply::Type::kNil);
  const auto err = run(*client, {"INCR", "k"});  // not an integer
  EXPECT_EQ(err.outcome, Result::Outcome::kReply);
  EXPECT_TRUE(err.reply.is_error());
  EXPECT_FALSE(err.ok());
  EXPECT_NE(err.reply.str.find("ERR"), std::string::npos);
}

TEST(RedisClient, ManyConcurrentCommandsFromSeveralThreadsAllComplete) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  Connected c;
  ASSERT_TRUE(c.up());
  auto& client = c.client;
  auto& server = c.server;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i)
        client->command({"INCR", "n"}, [&](Result r) { ok += r.ok() ? 1 : 0; }, 2.0);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 400 && ok < 1000; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(ok.load(), 1000);
  EXPECT_EQ(server.call({"GET", "n"}), "1000");
}

TEST(RedisClient, DownAtStartFailsFastThenConnectsWhenRedisComes) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  RedisServer server;  // not started yet: nothing listens on its port
  prometheus::Registry registry;  // outlives the loop, whose handlers update its series
  Loop loop;
  auto client = make_client(config_for(server), loop.executor(), &registry);
  client->start();
  ASSERT_TRUE(wait_health(*client, Health::kDown));
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run(*client, {"PING"});
  EXPECT_EQ(r.outcome, Result::Outcome::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms) << "a down Redis must not make callers wait";
  EXPECT_NE(r.error.find("redis unavailable"), std::string::npos) << r.error;

  ASSERT_TRUE(server.start());
  ASSERT_TRUE(wait_health(*client, Health::kUp)) << "no reconnect within 3 s";
  EXPECT_EQ(run(*client, {"PING"}).reply.str, "PONG");
}

TEST(RedisClient, KilledServerMeansDownAndRestartMeansUpAgain) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  std::atomic<int> transitions{0};
  Connected c;
  c.client->on_health([&](Health) { ++transitions; });
  ASSERT_TRUE(c.up());
  auto& client = c.client;
  auto& server = c.server;
  ASSERT_TRUE(run(*client, {"SET", "survives", "1"}).ok());

  server.kill(SIGKILL);
  ASSERT_TRUE(wait_health(*client, Health::kDown));
  EXPECT_EQ(run(*client, {"GET", "survives"}).outcome, Result::Outcome::kUnavailable);

  ASSERT_TRUE(server.start());  // same port, same append-only file
  ASSERT_TRUE(wait_health(*client, Health::kUp));
  EXPECT_EQ(run(*client, {"GET", "survives"}).reply.str, "1") << "appendfsync always keeps acknowledged writes";
  EXPECT_EQ(transitions.load(), 3);  // up, down, up: one per transition, not one per retry
}

TEST(RedisClient, StalledServerTimesOutWithinTheBoundAndTheConnectionIsReplaced) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  Connected c([](RedisConfig& cfg) { cfg.command_timeout_s = 0.05; });
  ASSERT_TRUE(c.up());
  auto& client = c.client;
  auto& server = c.server;

  server.pause();
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run(*client, {"PING"});
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.outcome, Result::Outcome::kTimeout);
  EXPECT_GE(took, 45ms);
  EXPECT_LT(took, 1000ms);
  // Still no answer a while later: the connection is declared stalled and dropped.
  EXPECT_TRUE(wait_health(*client, Health::kDown));
  server.resume();
  ASSERT_TRUE(wait_health(*client, Health::kUp));
  EXPECT_EQ(run(*client, {"PING"}).reply.str, "PONG");
}

TEST(RedisClient, AuthenticatesWithThePasswordAndIsDownWithAWrongOne) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  RedisServer server(false, "s3cret");
  ASSERT_TRUE(server.start());
  Loop loop;
  auto good = config_for(server);
  good->password = "s3cret";
  auto client = make_client(good, loop.executor(), nullptr);
  client->start();
  ASSERT_TRUE(wait_health(*client, Health::kUp));
  EXPECT_EQ(run(*client, {"SET", "k", "v"}).reply.str, "OK");

  auto bad = config_for(server);
  bad->password = "wrong";
  auto refused = make_client(bad, loop.executor(), nullptr);
  refused->start();
  EXPECT_TRUE(wait_health(*refused, Health::kDown));
  std::this_thread::sleep_for(300ms);  // several reconnects with AUTH refused: never up
  EXPECT_EQ(refused->health(), Health::kDown);
  const auto r = run(*refused, {"GET", "k"});  // unavailable, or refused (NOAUTH): never the value
  EXPECT_FALSE(r.ok() && r.reply.str == "v") << r.reply.str;
}

TEST(RedisClient, StopCompletesCommandsInFlight) {
  TIDEGATE_REQUIRE_REDIS_SERVER();
  Connected c;
  ASSERT_TRUE(c.up());
  auto& client = c.client;
  auto p = std::make_shared<std::promise<Result>>();
  auto f = p->get_future();
  // BLPOP on an empty list would wait 10 s; stop() must complete it now.
  client->command({"BLPOP", "empty", "10"}, [p](Result r) { p->set_value(std::move(r)); }, 20.0);
  std::this_thread::sleep_for(50ms);
  client->stop();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(f.get().outcome, Result::Outcome::kUnavailable);
  EXPECT_EQ(run(*client, {"PING"}).outcome, Result::Outcome::kUnavailable);
}

TEST(RedisReply, NumberParsesIntegersAndNumericStringsOnly) {
  Reply r;
  r.type = Reply::Type::kString;
  r.str = "1.5";
  EXPECT_DOUBLE_EQ(r.number(-1), 1.5);
  r.str = "1.5x";
  EXPECT_DOUBLE_EQ(r.number(-1), -1);
  r.type = Reply::Type::kNil;
  EXPECT_DOUBLE_EQ(r.number(-1), -1);
  r.type = Reply::Type::kInteger;
  r.integer = 7;
  EXPECT_DOUBLE_EQ(r.number(-1), 7);
}

}  // namespace
}  // namespace tidegate::redis
