// The Lease client and elector against the loopback fake API server (fake_lease_api.h): the
// wire format, create/update races decided by resourceVersion, two electors racing, a killed
// leader (its calls refused: it stops renewing; the other takes over after lease_duration), a
// partitioned leader (its calls hang: it stops acting within renew_deadline, before the other
// can take over), and a graceful hand-over.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include "electors.h"
#include "fake_lease_api.h"
#include "kubernetes_lease.h"

namespace tidegate::scaler {
namespace {

namespace json = boost::json;
using testing::FakeHttpServer;
using testing::FakeRequest;
using testing::FakeResponse;

constexpr double kLease = 2.0, kRenew = 1.2, kRetry = 0.1;

// Sanitizer builds run slower (TSan several times): upper bounds on reaction times stretch.
double slack(double s) {
  const char* f = std::getenv("TIDEGATE_TEST_SLOWDOWN");
  return s * (f ? std::max(1.0, std::atof(f)) : 1.0);
}

// One elector's way to the API: its own loopback front, which the test can cut off.
struct Front {
  enum class Mode { kUp, kHang };
  std::atomic<Mode> state{Mode::kUp};
  std::unique_ptr<FakeHttpServer> server;
};

struct LeaseApiTest : ::testing::Test {
  FakeLeaseApi api;
  std::map<std::string, std::unique_ptr<Front>> fronts;

  FakeResponse route(const FakeRequest& r, Front& f) {
    if (f.state == Front::Mode::kHang) return FakeResponse{200, "", "application/json", true};
    if (auto answer = api.handle(r)) return *answer;
    return FakeResponse{404, R"({"kind":"Status","code":404})"};
  }

  LeaderElectionConfig config(const std::string& identity) {
    auto& f = fronts[identity];
    f = std::make_unique<Front>();
    Front* raw = f.get();
    raw->server = std::make_unique<FakeHttpServer>([this, raw](const FakeRequest& r) { return route(r, *raw); });
    LeaderElectionConfig c;
    c.kind = ElectionKind::kKubernetes;
    c.lease_name = "tidegate-scaler";
    c.identity = identity;
    c.api_server = raw->server->url();
    c.ns = "ns1";
    c.token = "tok-" + identity;
    c.lease_duration_s = kLease;
    c.renew_deadline_s = kRenew;
    c.retry_period_s = kRetry;
    c.request_timeout_s = 0.3;
    return c;
  }

  // "a" leads (started alone), then "b" runs beside it for `settle_s`.
  std::pair<std::unique_ptr<LeaderElector>, std::unique_ptr<LeaderElector>> leader_and_follower(double settle_s) {
    auto a = make_kubernetes_elector(config("a"));
    a->start();
    EXPECT_TRUE(watch({a.get()}, 3, [&] { return a->may_actuate(); }));
    auto b = make_kubernetes_elector(config("b"));
    b->start();
    watch({a.get(), b.get()}, settle_s, [] { return false; });
    return {std::move(a), std::move(b)};
  }

  // Polls every 5 ms until `pred` or `timeout_s`; asserts no two electors act at once meanwhile.
  template <typename Pred>
  bool watch(const std::vector<LeaderElector*>& electors, double timeout_s, Pred pred) {
    const double end = FakeLeaseApi::now() + timeout_s;
    while (FakeLeaseApi::now() < end) {
      int acting = 0;
      for (auto* e : electors) acting += e->may_actuate();
      EXPECT_LE(acting, 1) << "two scalers acting at once";
      if (acting > 1 || pred()) return acting <= 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
};

TEST_F(LeaseApiTest, ClientSpeaksTheLeaseApiAndVersionsDecideRaces) {
  auto ca = config("a"), cb = config("b");
  KubernetesLeaseClient a(ca), b(cb);
  EXPECT_EQ(a.get().outcome, LeaseCall::Outcome::kNotFound);
  EXPECT_EQ(b.get().outcome, LeaseCall::Outcome::kNotFound);
  // Both saw no lease and both create: one wins, the other gets AlreadyExists.
  LeaseMachine ma("a", kLease, kRenew), mb("b", kLease, kRenew);
  ma.next(std::nullopt, 0);
  mb.next(std::nullopt, 0);
  const auto won = a.create(ma.proposal(LeaseAction::kCreate, std::nullopt, micro_time(1764769562.5)));
  const auto lost = b.create(mb.proposal(LeaseAction::kCreate, std::nullopt, micro_time(1764769562.6)));
  ASSERT_EQ(won.outcome, LeaseCall::Outcome::kOk) << won.error;
  EXPECT_EQ(lost.outcome, LeaseCall::Outcome::kConflict);
  EXPECT_EQ(won.record->holder, "a");
  EXPECT_EQ(won.record->resource_version, "101");

  const auto posts = fronts["a"]->server->requests();
  ASSERT_EQ(posts.size(), 2u);
  EXPECT_EQ(posts[1].method, "POST");
  EXPECT_EQ(posts[1].target, "/apis/coordination.k8s.io/v1/namespaces/ns1/leases");
  EXPECT_EQ(posts[1].headers.at("authorization"), "Bearer tok-a");
  const auto body = json::parse(posts[1].body).as_object();
  EXPECT_EQ(body.at("apiVersion"), "coordination.k8s.io/v1");
  EXPECT_EQ(body.at("kind"), "Lease");
  EXPECT_EQ(body.at("metadata").at("name"), "tidegate-scaler");
  EXPECT_FALSE(body.at("metadata").as_object().contains("resourceVersion"));
  EXPECT_EQ(body.at("spec").at("holderIdentity"), "a");
  EXPECT_EQ(body.at("spec").at("leaseDurationSeconds"), 2);
  EXPECT_EQ(body.at("spec").at("renewTime"), "2025-12-03T13:46:02.500000Z");
  EXPECT_EQ(body.at("spec").at("leaseTransitions"), 0);

  // Two updates from the same read: the first bumps the version, the second is a 409.
  const auto read = b.get();
  ASSERT_EQ(read.outcome, LeaseCall::Outcome::kOk);
  auto renewal = ma.proposal(LeaseAction::kRenew, read.record, micro_time(1764769563));
  auto grab = mb.proposal(LeaseAction::kAcquire, read.record, micro_time(1764769563));
  EXPECT_EQ(a.update(renewal).outcome, LeaseCall::Outcome::kOk);
  EXPECT_EQ(b.update(grab).outcome, LeaseCall::Outcome::kConflict);
  const auto puts = fronts["a"]->server->requests().back();
  EXPECT_EQ(puts.method, "PUT");
  EXPECT_EQ(puts.target, "/apis/coordination.k8s.io/v1/namespaces/ns1/leases/tidegate-scaler");
  EXPECT_EQ(json::parse(puts.body).at("metadata").at("resourceVersion"), "101");
  EXPECT_EQ(api.holder(), "a");
  EXPECT_EQ(api.conflicts(), 2);

  // Faults: the server gone is an error, not a verdict.
  fronts["b"]->server.reset();
  EXPECT_EQ(b.get().outcome, LeaseCall::Outcome::kError);
}

TEST_F(LeaseApiTest, AnApiServerThatFailsNeverMakesALeader) {
  auto c = config("a");
  std::atomic<int> calls{0};
  fronts["a"]->server = std::make_unique<FakeHttpServer>([&](const FakeRequest&) {
    ++calls;
    return FakeResponse{503, R"({"kind":"Status","code":503})"};
  });
  c.api_server = fronts["a"]->server->url();
  auto a = make_kubernetes_elector(c);
  a->start();
  EXPECT_FALSE(watch({a.get()}, 0.6, [&] { return a->may_actuate(); }));
  EXPECT_GE(calls.load(), 3) << "it keeps trying every retry_period";
  EXPECT_NE(a->status().last_error.find("HTTP 503"), std::string::npos) << a->status().last_error;
  EXPECT_FALSE(a->status().leader);
}

TEST_F(LeaseApiTest, TwoElectorsRacingEndWithOneLeader) {
  for (int round = 0; round < 3; ++round) {
    api.reset();
    auto a = make_kubernetes_elector(config("a" + std::to_string(round)));
    auto b = make_kubernetes_elector(config("b" + std::to_string(round)));
    a->start();
    b->start();
    EXPECT_TRUE(watch({a.get(), b.get()}, 3, [&] { return a->may_actuate() || b->may_actuate(); }));
    // Settled: it stays with the one, over many renewals.
    const std::string leader = a->may_actuate() ? a->identity() : b->identity();
    watch({a.get(), b.get()}, 1.0, [] { return false; });
    EXPECT_EQ(api.holder(), leader);
    auto* follower = a->may_actuate() ? b.get() : a.get();
    EXPECT_EQ(follower->status().holder, leader);
    EXPECT_EQ(follower->status().transitions, 0u);
    for (const auto& w : api.writes()) EXPECT_EQ(w.holder, leader) << "only the leader wrote";
    a.reset();
    b.reset();
    fronts.clear();
  }
}

TEST_F(LeaseApiTest, AKilledLeadersLeasePassesAfterLeaseDuration) {
  auto [a, b] = leader_and_follower(0.5);
  EXPECT_FALSE(b->may_actuate());
  // "Killed": nothing of a reaches the API any more (connections refused), nothing released.
  fronts["a"]->server.reset();
  ASSERT_TRUE(watch({a.get(), b.get()}, kLease + 2, [&] { return b->may_actuate(); }));
  const auto last_a = api.last_write_by("a");
  const auto first_b = api.first_write_by("b");
  ASSERT_TRUE(last_a && first_b);
  const double gap = first_b->t - last_a->t;
  EXPECT_GE(gap, kLease) << "b waited out the lease";
  EXPECT_LE(gap, kLease + 3 * kRetry + slack(0.3)) << "and not much longer";
  EXPECT_EQ(first_b->transitions, 1);
  EXPECT_FALSE(a->may_actuate());
  EXPECT_EQ(b->status().holder, "b");
}

TEST_F(LeaseApiTest, APartitionedLeaderStopsActingBeforeTheOtherCanAcquire) {
  auto [a, b] = leader_and_follower(0.5);
  // The API hangs for a (its requests time out); b still reaches it.
  fronts["a"]->state = Front::Mode::kHang;
  double a_stopped = 0;
  ASSERT_TRUE(watch({a.get(), b.get()}, kLease + 2, [&] {
    if (!a_stopped && !a->may_actuate()) a_stopped = FakeLeaseApi::now();
    return b->may_actuate();
  }));
  const double b_started = FakeLeaseApi::now();
  const auto last_a = api.last_write_by("a");
  ASSERT_TRUE(last_a);
  ASSERT_GT(a_stopped, 0);
  EXPECT_LE(a_stopped - last_a->t, kRenew + slack(0.05)) << "fenced within renew_deadline of its last renewal";
  EXPECT_LT(a_stopped, b_started);
  EXPECT_GE(b_started - a_stopped, kLease - kRenew - 0.1) << "the margin between fence and takeover";
  EXPECT_TRUE(a->status().last_error.find("leases/tidegate-scaler") != std::string::npos) << a->status().last_error;
  // The partition heals: a sees b's name and stays a follower.
  fronts["a"]->state = Front::Mode::kUp;
  watch({a.get(), b.get()}, 0.5, [] { return false; });
  EXPECT_FALSE(a->may_actuate());
  EXPECT_TRUE(b->may_actuate());
  EXPECT_EQ(a->status().holder, "b");
  EXPECT_EQ(a->status().transitions, 2u) << "leader, then follower";
}

TEST_F(LeaseApiTest, AGracefulStopHandsOverWithoutWaitingOutTheLease) {
  auto [a, b] = leader_and_follower(0.3);
  const double stopped = FakeLeaseApi::now();
  a->stop();
  EXPECT_FALSE(a->may_actuate());
  ASSERT_TRUE(watch({a.get(), b.get()}, kLease, [&] { return b->may_actuate(); }));
  EXPECT_LT(FakeLeaseApi::now() - stopped, kLease / 2) << "released, not expired";
  const auto writes = api.writes();
  std::size_t last_a = 0;
  for (std::size_t i = 0; i < writes.size(); ++i)
    if (writes[i].holder == "a") last_a = i;
  ASSERT_GE(writes.size(), last_a + 3);
  EXPECT_EQ(writes[last_a + 1].holder, "") << "the release cleared holderIdentity";
  EXPECT_EQ(writes[last_a + 2].holder, "b");
}

}  // namespace
}  // namespace tidegate::scaler
