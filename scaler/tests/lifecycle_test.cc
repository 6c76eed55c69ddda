// The lifecycle state machine against a scripted actuator and router, in fake time.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "tidegate/scaler/lifecycle.h"

namespace tidegate::scaler {
namespace {

class FakeActuator final : public Actuator {
 public:
  bool pending_mode = false;  // Kubernetes-like: starts become visible later
  int starts = 0, warm_starts = 0;
  std::vector<std::string> stopped;
  std::vector<ObservedReplica> live;
  int pending = 0;

  std::string_view kind() const override { return "fake"; }
  bool elastic() const override { return true; }
  bool start(bool for_warm) override {
    ++starts;
    warm_starts += for_warm;
    if (pending_mode) ++pending;
    else live.push_back({"r" + std::to_string(starts), {"127.0.0.1", static_cast<std::uint16_t>(9000 + starts)}, false, false, {}});
    return true;
  }
  void stop(const std::string& id) override {
    stopped.push_back(id);
    std::erase_if(live, [&](const ObservedReplica& r) { return r.id == id; });
    if (id.rfind("pending-", 0) == 0) --pending;
  }
  PoolObservation observe() override {
    PoolObservation o{live, pending};
    std::erase_if(live, [](const ObservedReplica& r) { return r.exited; });
    return o;
  }
  ActuatorStats stats() const override { return {}; }
  bool can_park = true;
  std::vector<std::string> parked, woken;
  bool park(const std::string& id) override {
    if (!can_park) return false;
    parked.push_back(id);
    return true;
  }
  bool unpark(const std::string& id) override {
    woken.push_back(id);
    for (auto& r : live)
      if (r.id == id) r.ready = false;  // not ready until the engine is awake
    return can_park;
  }

  void materialise(const std::string& id) {
    --pending;
    live.push_back({id, {"10.0.0.1", 8000}, false, false, {}});
  }
  void ready_all() {
    for (auto& r : live) r.ready = true;
  }
  void kill(const std::string& id) {
    for (auto& r : live)
      if (r.id == id) r.exited = true, r.detail = "killed by signal 9";
  }
};

class FakeRouting final : public RoutingTarget {
 public:
  std::vector<std::string> activated, drained, removed;
  std::map<std::string, std::function<void()>> on_drained;
  void activate(const std::string&, const std::string& id, const Endpoint&) override { activated.push_back(id); }
  void drain(const std::string&, const std::string& id, std::function<void()> done) override {
    drained.push_back(id);
    on_drained[id] = std::move(done);
  }
  void remove(const std::string&, const std::string& id) override { removed.push_back(id); }
  void finish(const std::string& id) { on_drained.at(id)(); }
};

struct Fixture : ::testing::Test {
  FakeActuator act;
  FakeRouting routing;
  std::vector<std::pair<std::string, ReplicaState>> transitions;
  std::unique_ptr<PoolController> make(int warm_pool, double startup_timeout = 60, double drain_timeout = 120) {
    LifecycleConfig c;
    c.warm_pool_size = warm_pool;
    c.startup_timeout_s = startup_timeout;
    c.drain_timeout_s = drain_timeout;
    return std::make_unique<PoolController>("m", "gpu", c, act, routing,
                                            [this](const std::string& id, const std::string& model,
                                                   const std::string& cls, ReplicaState s, double) {
                                              EXPECT_EQ(model, "m");
                                              EXPECT_EQ(cls, "gpu");
                                              transitions.emplace_back(id, s);
                                            });
  }
};

TEST_F(Fixture, ColdStartActivatesOnceHealthy) {
  auto pool = make(0);
  pool->step(0, 2);
  EXPECT_EQ(act.starts, 2);
  EXPECT_EQ(pool->counts().starting, 2);
  pool->step(1, 2);
  EXPECT_EQ(act.starts, 2) << "starting replicas count: no second round";
  act.ready_all();
  pool->step(2, 2);
  EXPECT_EQ(pool->counts().active, 2);
  EXPECT_EQ(routing.activated.size(), 2u);
}

TEST_F(Fixture, WarmReplicasCountWithinMaxReplicas) {
  auto pool = make(1);
  pool->set_max_replicas(2);
  pool->step(0, 1);
  EXPECT_EQ(act.starts, 2) << "one active and one warm fit under 2";
  act.ready_all();
  pool->step(1, 1);
  EXPECT_EQ(pool->counts().active, 1);
  EXPECT_EQ(pool->counts().warm, 1);
  // At the ceiling the warm replica is promoted and not refilled: two engines, not three.
  pool->step(2, 2);
  pool->step(3, 2);
  EXPECT_EQ(pool->counts().active, 2);
  EXPECT_EQ(pool->counts().warm + pool->counts().starting, 0);
  EXPECT_EQ(act.starts, 2);
  EXPECT_EQ(pool->warm_target(), 0);
  // Back to one: the drained replica goes back to the warm pool; nothing stopped or started.
  pool->step(4, 1);
  ASSERT_EQ(routing.drained.size(), 1u);
  routing.finish(routing.drained[0]);
  pool->step(5, 1);
  EXPECT_EQ(pool->counts().active, 1);
  EXPECT_EQ(pool->counts().warm, 1);
  EXPECT_TRUE(act.stopped.empty());
  EXPECT_EQ(act.starts, 2);
  // Standby counts too: one active and one parked leave no room for a warm one.
  pool->step(6, 1, nullptr, 1);
  EXPECT_EQ(pool->counts().standby, 1);
  EXPECT_EQ(pool->counts().warm + pool->counts().starting, 0);
  EXPECT_EQ(act.starts, 2);
  // No ceiling (the replay tool's controller): the pool refills on top.
  pool->set_max_replicas(0);
  pool->step(7, 2);
  EXPECT_EQ(act.woken.size(), 1u);
  EXPECT_EQ(act.starts, 3) << "the parked one wakes for the second active; the pool refills on top";
}

TEST_F(Fixture, StandbyParksWakesAndIsBilledAsItsOwnState) {
  auto pool = make(0);
  pool->step(0, 1, nullptr, 2);  // one active, two parked
  EXPECT_EQ(act.starts, 3);
  act.ready_all();
  pool->step(1, 1, nullptr, 2);
  EXPECT_EQ(pool->counts().active, 1);
  EXPECT_EQ(pool->counts().standby, 2);
  EXPECT_EQ(act.parked.size(), 2u);
  EXPECT_EQ(std::count_if(transitions.begin(), transitions.end(),
                          [](const auto& t) { return t.second == ReplicaState::kStandby; }),
            2);
  // A burst: parked replicas are woken before any cold start, and no refill is started for
  // the standby the plan no longer wants.
  pool->step(2, 3, nullptr, 0);
  EXPECT_EQ(act.woken.size(), 2u);
  EXPECT_EQ(act.starts, 3);
  EXPECT_EQ(pool->counts().starting, 2);
  pool->step(3, 3, nullptr, 0);
  EXPECT_EQ(pool->counts().active, 1) << "not routed before the engine is awake";
  act.ready_all();
  pool->step(4, 3, nullptr, 0);
  EXPECT_EQ(pool->counts().active, 3);
  EXPECT_EQ(act.starts, 3);
  // Back down: drained to warm, then parked, not stopped.
  pool->step(5, 1, nullptr, 2);
  EXPECT_EQ(pool->counts().draining, 2);
  for (const auto& id : routing.drained) routing.finish(id);
  pool->step(6, 1, nullptr, 2);
  pool->step(7, 1, nullptr, 2);
  EXPECT_EQ(pool->counts().standby, 2);
  EXPECT_TRUE(act.stopped.empty());
  // Fewer wanted: the surplus parked replica is stopped.
  pool->step(8, 1, nullptr, 1);
  EXPECT_EQ(pool->counts().standby, 1);
  EXPECT_EQ(act.stopped.size(), 1u);
}

TEST_F(Fixture, WithoutAStandbyMechanismReplicasStayWarm) {
  act.can_park = false;
  auto pool = make(0);
  pool->step(0, 1, nullptr, 2);
  act.ready_all();
  pool->step(1, 1, nullptr, 2);
  EXPECT_EQ(pool->counts().standby, 0);
  EXPECT_EQ(pool->counts().warm, 2);  // kept ready (billed as warm) rather than lost
  EXPECT_EQ(act.starts, 3);
  pool->step(2, 1, nullptr, 2);
  EXPECT_EQ(act.starts, 3) << "no start loop for a standby that cannot be parked";
}

TEST_F(Fixture, WarmPoolPromotesAtOnceAndRefills) {
  auto pool = make(2);
  pool->step(0, 1);
  EXPECT_EQ(act.starts, 3);
  act.ready_all();
  pool->step(1, 1);
  EXPECT_EQ(pool->counts().active, 1);
  EXPECT_EQ(pool->counts().warm, 2);
  pool->step(2, 3);  // the step: both warm replicas routed in this very tick
  EXPECT_EQ(pool->counts().active, 3);
  EXPECT_EQ(routing.activated.size(), 3u);
  EXPECT_EQ(pool->counts().starting, 2);  // pool refills in the background
  EXPECT_EQ(act.warm_starts, 2 + 2);
}

TEST_F(Fixture, ScaleDownDrainsBeforeStoppingAndDemotesWhenPoolIsShort) {
  auto pool = make(1);
  pool->step(0, 3);
  act.ready_all();
  pool->step(1, 3);
  ASSERT_EQ(pool->counts().active, 3);
  ASSERT_EQ(pool->counts().warm, 1);
  pool->step(2, 3);
  act.ready_all();
  transitions.clear();
  // Use all warm capacity so the pool is short when we scale down.
  pool->step(3, 4);
  ASSERT_EQ(pool->counts().active, 4);
  act.stopped.clear();
  pool->step(4, 2);
  ASSERT_EQ(routing.drained.size(), 2u);
  EXPECT_EQ(pool->counts().draining, 2);
  auto was_stopped = [&](const std::string& id) {
    return std::find(act.stopped.begin(), act.stopped.end(), id) != act.stopped.end();
  };
  // In-flight generations finish first: nothing drained is stopped while draining.
  pool->step(5, 2);
  for (const auto& id : routing.drained) EXPECT_FALSE(was_stopped(id)) << id;
  // The refill started at t=3 is surplus now that a replica goes back to the pool.
  EXPECT_TRUE(was_stopped("r5"));
  for (const auto& id : routing.drained) routing.finish(id);
  pool->step(6, 2);
  EXPECT_EQ(pool->counts().draining, 0);
  EXPECT_EQ(pool->counts().active, 2);
  EXPECT_EQ(pool->counts().warm, 1) << "one demoted back to the (short) warm pool";
  EXPECT_EQ(pool->counts().starting, 0);
  EXPECT_TRUE(was_stopped(routing.drained[0]) != was_stopped(routing.drained[1]));
  EXPECT_EQ(routing.removed.size(), 2u);
}

TEST_F(Fixture, DrainTimeoutForcesTheStop) {
  auto pool = make(0, 60, 30);
  pool->step(0, 2);
  act.ready_all();
  pool->step(1, 2);
  pool->step(2, 1);
  ASSERT_EQ(pool->counts().draining, 1);
  pool->step(20, 1);
  EXPECT_TRUE(act.stopped.empty());
  pool->step(40, 1);
  EXPECT_EQ(act.stopped.size(), 1u);
  ASSERT_FALSE(pool->events().empty());
  EXPECT_EQ(pool->events().back().kind, "drain_timeout");
}

TEST_F(Fixture, NeverHealthyReplicaIsStoppedReplacedAndReported) {
  auto pool = make(0, 10);
  pool->step(0, 1);
  ASSERT_EQ(act.starts, 1);
  pool->step(5, 1);
  EXPECT_TRUE(act.stopped.empty());
  pool->step(11, 1);
  ASSERT_EQ(act.stopped.size(), 1u);
  EXPECT_EQ(act.stopped[0], "r1");
  EXPECT_EQ(act.starts, 2) << "replacement started in the same tick";
  ASSERT_EQ(pool->events().size(), 1u);
  EXPECT_EQ(pool->events()[0].kind, "startup_timeout");
  EXPECT_EQ(pool->replaced_total(), 1u);
}

TEST_F(Fixture, ActiveReplicaThatDiesIsRemovedAndReplacedFromTheWarmPool) {
  auto pool = make(1);
  pool->step(0, 2);
  act.ready_all();
  pool->step(1, 2);
  ASSERT_EQ(pool->counts().active, 2);
  const std::string victim = routing.activated[0];
  act.kill(victim);
  pool->step(2, 2);
  EXPECT_NE(std::find(routing.removed.begin(), routing.removed.end(), victim), routing.removed.end());
  EXPECT_EQ(pool->counts().active, 2) << "warm replica promoted";
  EXPECT_EQ(pool->counts().starting, 1) << "pool refilling";
  ASSERT_FALSE(pool->events().empty());
  EXPECT_EQ(pool->events().back().kind, "died");
  EXPECT_EQ(pool->events().back().detail, "killed by signal 9");
}

TEST_F(Fixture, PendingStartsAreAdoptedWhenTheyAppear) {
  act.pending_mode = true;
  auto pool = make(0, 30);
  pool->step(0, 1);
  EXPECT_EQ(act.starts, 1);
  EXPECT_EQ(pool->counts().starting, 1);
  pool->step(5, 1);
  EXPECT_EQ(act.starts, 1);
  act.materialise("pod-a");
  pool->step(10, 1);
  EXPECT_EQ(pool->counts().starting, 1);
  const auto reps = pool->replicas();
  ASSERT_EQ(reps.size(), 1u);
  EXPECT_EQ(reps[0].id, "pod-a");
  EXPECT_EQ(reps[0].created, 0) << "startup clock kept from the request";
  pool->step(31, 1);  // never ready: timed out from t=0
  ASSERT_EQ(act.stopped.size(), 1u);
  EXPECT_EQ(act.stopped[0], "pod-a");
}

TEST_F(Fixture, PendingStartThatNeverAppearsIsCancelled) {
  act.pending_mode = true;
  auto pool = make(0, 30);
  pool->step(0, 1);
  pool->step(31, 1);
  ASSERT_EQ(act.stopped.size(), 1u);
  EXPECT_EQ(act.stopped[0].rfind("pending-", 0), 0u);
  EXPECT_EQ(act.starts, 2);
}

TEST_F(Fixture, ListenerSeesTheWholeLifecycle) {
  auto pool = make(0);
  pool->step(0, 1);
  act.ready_all();
  pool->step(1, 1);
  pool->step(2, 0);
  routing.finish("r1");
  pool->step(3, 0);
  std::vector<ReplicaState> want{ReplicaState::kStarting, ReplicaState::kWarm, ReplicaState::kActive,
                                 ReplicaState::kDraining, ReplicaState::kStopped};
  std::vector<ReplicaState> got;
  for (const auto& [id, s] : transitions)
    if (id == "r1") got.push_back(s);
  EXPECT_EQ(got, want);
}

TEST_F(Fixture, SurplusWarmReplicasAreStoppedAndLeastBusyIsDrained) {
  auto pool = make(0);
  pool->step(0, 3);
  act.ready_all();
  pool->step(1, 3);
  ASSERT_EQ(pool->counts().active, 3);
  GatewaySignals gw;
  gw.in_flight_by_replica = {{"r1", 0}, {"r2", 7}, {"r3", 5}};
  pool->step(2, 2, &gw);
  ASSERT_EQ(routing.drained.size(), 1u);
  EXPECT_EQ(routing.drained[0], "r1");
}

TEST_F(Fixture, ActiveReplicaTheGatewayHoldsUnhealthyIsReplaced) {
  LifecycleConfig c;
  c.unhealthy_replace_after_s = 30;
  PoolController pool("m", "gpu", c, act, routing);
  pool.step(0, 2);
  act.ready_all();
  pool.step(1, 2);
  ASSERT_EQ(pool.counts().active, 2);
  GatewaySignals gw;
  gw.replica_healthy = {{"r1", false}, {"r2", true}};
  pool.step(10, 2, &gw);
  pool.step(39, 2, &gw);
  EXPECT_TRUE(act.stopped.empty()) << "a blip is not a reason";
  gw.replica_healthy["r1"] = true;  // recovered: the clock resets
  pool.step(40, 2, &gw);
  gw.replica_healthy["r1"] = false;
  pool.step(41, 2, &gw);
  pool.step(70, 2, &gw);
  EXPECT_TRUE(act.stopped.empty());
  pool.step(72, 2, &gw);
  ASSERT_EQ(act.stopped, std::vector<std::string>{"r1"});
  EXPECT_EQ(routing.removed, std::vector<std::string>{"r1"});
  EXPECT_EQ(act.starts, 3) << "replacement";
  EXPECT_EQ(pool.events().back().kind, "unhealthy");
}

TEST_F(Fixture, ShutdownStopsEverything) {
  auto pool = make(1);
  pool->step(0, 1);
  act.ready_all();
  pool->step(1, 1);
  pool->shutdown(2);
  EXPECT_EQ(act.stopped.size(), 2u);
  EXPECT_EQ(routing.removed.size(), 1u);
  EXPECT_TRUE(pool->replicas().empty());
}

}  // namespace
}  // namespace tidegate::scaler
