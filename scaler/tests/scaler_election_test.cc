// Two live Scaler objects over one shared fleet (as two gateways over one Deployment), with
// the election injected: only the leader starts and stops replicas; the follower routes what
// the leader runs, keeps deciding (records marked not actuated), and says so on the admin
// state and the metrics. Then leadership moves and the other one acts.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <yaml-cpp/yaml.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "tidegate/scaler/scaler.h"

namespace tidegate::scaler {
namespace {

// What the cluster runs: one list, seen by every gateway's actuator.
struct Fleet {
  std::vector<ObservedReplica> replicas;
  int next = 0;
};

class SharedFleetActuator final : public Actuator {
 public:
  SharedFleetActuator(Fleet& fleet, int& starts, int& stops) : fleet_(fleet), starts_(starts), stops_(stops) {}
  std::string_view kind() const override { return "shared"; }
  bool elastic() const override { return true; }
  bool start(bool) override {
    ++starts_;
    const int n = ++fleet_.next;
    fleet_.replicas.push_back({"pod" + std::to_string(n), {"10.0.0." + std::to_string(n), 8000}, true, false, {}});
    return true;
  }
  void stop(const std::string& id) override {
    ++stops_;
    std::erase_if(fleet_.replicas, [&](const ObservedReplica& r) { return r.id == id; });
  }
  PoolObservation observe() override {
    if (on_observe) on_observe();
    return {fleet_.replicas, 0};
  }
  ActuatorStats stats() const override { return {}; }
  std::function<void()> on_observe;  // runs inside the scaler's tick, before its starts and stops

 private:
  Fleet& fleet_;
  int& starts_;
  int& stops_;
};

class SwitchElector final : public LeaderElector {
 public:
  SwitchElector(std::string me, std::string& holder) : me_(std::move(me)), holder_(holder) {}
  void start() override {}
  void stop() override {}
  bool may_actuate() const override { return holder_ == me_; }
  ElectionStatus status() const override {
    ElectionStatus s;
    s.leader = s.may_actuate = may_actuate();
    s.holder = holder_;
    s.transitions = transitions;
    return s;
  }
  std::string identity() const override { return me_; }
  std::uint64_t transitions = 0;

 private:
  std::string me_;
  std::string& holder_;
};

class Routes final : public RoutingTarget, public SignalSource {
 public:
  std::set<std::string> routed;
  std::size_t demand = 0;
  // With hold_drains, a drained replica keeps this gateway's requests until finish_drains().
  bool hold_drains = false;
  std::map<std::string, std::function<void()>> draining;
  void activate(const std::string&, const std::string& id, const Endpoint&) override { routed.insert(id); }
  void drain(const std::string&, const std::string& id, std::function<void()> done) override {
    routed.erase(id);
    if (hold_drains) draining[id] = std::move(done);
    else done();
  }
  void finish_drains() {
    for (auto& [_, done] : draining) done();
    draining.clear();
  }
  void remove(const std::string&, const std::string& id) override { routed.erase(id); }
  GatewaySignals sample(const std::string&) const override {
    GatewaySignals g;
    g.queue_depth = demand;
    return g;
  }
};

constexpr const char* kConfig = R"(
tick: 100ms
leader_election: {kind: kubernetes, lease_name: gw, lease_duration: 15s, renew_deadline: 10s}
pools:
  - model: m
    actuator: {kind: static}
    signals: {engine_metrics: false, nvml: false}
    policy:
      min_replicas: 1
      max_replicas: 6
      targets: {queue_per_replica: 10}
      stable_window: 1s
      panic_window: 1s
      scale_down_stabilization: 0s
)";

struct Gateway {
  Routes routes;
  prometheus::Registry registry;
  int starts = 0, stops = 0;
  SwitchElector* elector = nullptr;
  SharedFleetActuator* actuator = nullptr;
  std::unique_ptr<Scaler> scaler;
};

struct ScalerElectionTest : ::testing::Test {
  Fleet fleet;
  Fleet b_own;  // with `own_fleets`: b's processes (a's are `fleet`)
  std::string holder = "gw-a";
  double now = 100;
  Gateway a, b;

  void SetUp() override { build(kConfig, false); }

  void build(const std::string& config_text, bool own_fleets) {
    for (const auto& [g, n] : {std::pair<Gateway*, std::string>{&a, "gw-a"}, std::pair<Gateway*, std::string>{&b, "gw-b"}}) {
      Gateway* gw = g;
      const std::string name = n;
      ScalerOptions o;
      o.clock = [this] { return now; };
      o.wall_clock = [this] { return 1700000000 + now; };
      o.make_actuator = [this, gw, own_fleets](const ModelPoolConfig&) {
        auto act = std::make_unique<SharedFleetActuator>(own_fleets && gw == &b ? b_own : fleet, gw->starts, gw->stops);
        gw->actuator = act.get();
        return act;
      };
      o.make_elector = [this, gw, name](const LeaderElectionConfig&) {
        auto e = std::make_unique<SwitchElector>(name, holder);
        gw->elector = e.get();
        return e;
      };
      gw->scaler = std::make_unique<Scaler>(parse_scaler_config(YAML::Load(config_text), "scaler"), gw->routes,
                                            &gw->routes, &gw->registry, o);
    }
  }
  // Both gateways with `leader_election: {kind: file}` on `lock`, each with its own processes.
  void build_file_lock(const std::filesystem::path& lock) {
    std::string text = kConfig;
    text.replace(text.find("{kind: kubernetes, lease_name: gw,"), 34, "{kind: file, lock_file: \"" + lock.string() + "\",");
    build(text, true);
  }
  void tick(int n) {
    for (int i = 0; i < n; ++i, now += 0.5) {
      a.scaler->tick();
      b.scaler->tick();
    }
  }
};

std::string metrics(prometheus::Registry& r) { return prometheus::TextSerializer().Serialize(r.Collect()); }

TEST_F(ScalerElectionTest, OnlyTheLeaderActsAndTheFollowerRoutesWhatItRuns) {
  a.routes.demand = b.routes.demand = 45;  // 5 replicas' worth at 10 per replica
  tick(8);
  EXPECT_EQ(fleet.replicas.size(), 5u);
  EXPECT_EQ(a.starts, 5);
  EXPECT_EQ(b.starts, 0) << "the follower's starts are withheld";
  EXPECT_EQ(b.routes.routed.size(), 5u) << "the follower routes every replica the leader runs";
  EXPECT_EQ(a.routes.routed.size(), 5u);

  const auto sa = a.scaler->admin_state(), sb = b.scaler->admin_state();
  EXPECT_EQ(sb.at("leader_election").at("role"), "follower");
  EXPECT_EQ(sb.at("leader_election").at("holder"), "gw-a");
  EXPECT_EQ(sb.at("leader_election").at("identity"), "gw-b");
  EXPECT_EQ(sb.at("pools").at(0).at("role"), "follower");
  EXPECT_EQ(sa.at("leader_election").at("role"), "leader");
  const auto& follower_decisions = sb.at("pools").at(0).at("changes").as_array();
  ASSERT_FALSE(follower_decisions.empty()) << "the follower still decides";
  for (const auto& d : follower_decisions) EXPECT_EQ(d.at("actuated"), false);
  for (const auto& d : sa.at("pools").at(0).at("changes").as_array()) EXPECT_EQ(d.at("actuated"), true);
  EXPECT_NE(metrics(a.registry).find("tidegate_scaler_leader{model=\"m\"} 1"), std::string::npos);
  EXPECT_NE(metrics(b.registry).find("tidegate_scaler_leader{model=\"m\"} 0"), std::string::npos);
}

TEST_F(ScalerElectionTest, AfterATakeoverTheNewLeaderScalesAndTheOldOneNoLonger) {
  a.routes.demand = b.routes.demand = 45;
  tick(8);
  ASSERT_EQ(fleet.replicas.size(), 5u);
  holder = "gw-b";  // a lost the lease
  b.elector->transitions = 1;
  a.elector->transitions = 2;
  a.routes.demand = b.routes.demand = 15;  // 2 replicas' worth
  tick(10);
  EXPECT_EQ(fleet.replicas.size(), 2u);
  EXPECT_EQ(a.stops, 0) << "the old leader stops nothing";
  EXPECT_EQ(b.stops, 3);
  EXPECT_EQ(a.routes.routed.size(), 2u) << "the old leader follows the new one's fleet";
  EXPECT_NE(metrics(b.registry).find("tidegate_scaler_leader_transitions_total{model=\"m\"} 1"), std::string::npos);
  EXPECT_NE(metrics(b.registry).find("tidegate_scaler_leader{model=\"m\"} 1"), std::string::npos);
}

// The elector's thread can hand the lease over while a tick is running. That tick decided as a
// follower (a follower asks for every replica it might have to route, to promote them all), so
// it must not start or stop anything even though the fence opened under it: only the next tick,
// deciding as the leader, acts. (Seen as a burst of starts to max_replicas, cancelled on the
// next tick, in multi_gateway.leader_kill9_takeover under ASan.)
TEST_F(ScalerElectionTest, ALeaseWonMidTickActsFromTheNextTickOn) {
  a.routes.demand = b.routes.demand = 5;  // one replica's worth
  tick(4);
  ASSERT_EQ(fleet.replicas.size(), 1u);
  ASSERT_EQ(a.starts, 1);
  b.actuator->on_observe = [this] { holder = "gw-b"; };  // the lease moves during b's tick
  b.scaler->tick();
  b.actuator->on_observe = nullptr;
  EXPECT_EQ(b.starts, 0) << "the tick that decided as a follower started replicas";
  EXPECT_EQ(fleet.replicas.size(), 1u);
  tick(6);
  EXPECT_EQ(fleet.replicas.size(), 1u) << "the new leader keeps the one replica its demand wants";
  EXPECT_EQ(b.starts + b.stops + a.stops, 0);
  a.routes.demand = b.routes.demand = 25;  // three replicas' worth: now b acts
  tick(8);
  EXPECT_EQ(fleet.replicas.size(), 3u);
  EXPECT_EQ(b.starts, 2);
  EXPECT_EQ(a.starts, 1);
}

// kind file: the replicas are each gateway's own processes; the leader publishes its view next
// to the lock and the follower routes through it, until that view goes stale.
TEST_F(ScalerElectionTest, WithAFileLockTheFollowerRoutesTheLeadersProcessesThroughItsPublishedView) {
  const auto lock = std::filesystem::temp_directory_path() / ("tidegate-election-" + std::to_string(::getpid()));
  a.scaler.reset();
  b.scaler.reset();
  build_file_lock(lock);
  a.routes.demand = b.routes.demand = 25;  // 3 replicas
  tick(8);
  EXPECT_EQ(fleet.replicas.size(), 3u);
  EXPECT_TRUE(b_own.replicas.empty());
  EXPECT_EQ(b.starts, 0);
  EXPECT_EQ(b.routes.routed.size(), 3u);
  for (const auto& id : a.routes.routed)
    EXPECT_TRUE(b.routes.routed.count("gw-a/" + id)) << id << ": b routes a's processes, ids qualified by a's name";
  EXPECT_TRUE(std::filesystem::exists(lock.string() + ".replicas.json"));
  // a stops publishing (it hangs, or died with its children): the view goes stale after 3 s.
  holder = "nobody";
  now += 4;
  b.scaler->tick();
  EXPECT_TRUE(b.routes.routed.empty()) << "a stale view routes nothing";
  std::filesystem::remove(lock.string() + ".replicas.json");
}

// kind file, scale-down: the follower drains what the leader drains, and the leader stops a
// replica only once the follower's requests there have finished (or the follower is gone), so
// that a scale-down never cuts another gateway's streams.
struct FileLockScaleDown : ScalerElectionTest {
  std::filesystem::path lock;
  void SetUp() override {
    lock = std::filesystem::temp_directory_path() / ("tidegate-drain-" + std::to_string(::getpid()));
    build_file_lock(lock);
    a.routes.demand = b.routes.demand = 25;  // 3 replicas
    tick(8);
    ASSERT_EQ(fleet.replicas.size(), 3u);
    ASSERT_EQ(b.routes.routed.size(), 3u);
    b.routes.hold_drains = true;  // the follower has streams on every replica
    a.routes.demand = b.routes.demand = 5;  // 1 replica
    tick(6);
  }
  void TearDown() override {
    for (const auto& f : std::filesystem::directory_iterator(lock.parent_path()))
      if (f.path().filename().string().rfind(lock.filename().string(), 0) == 0) std::filesystem::remove(f.path());
  }
  bool died_reported(Gateway& g) {
    const auto state = g.scaler->admin_state();  // kept: the loop reads into it
    for (const auto& e : state.at("pools").at(0).at("faults").as_array())
      if (e.at("kind") == "died") return true;
    return false;
  }
};

TEST_F(FileLockScaleDown, TheLeaderStopsAReplicaOnlyOnceTheFollowerHasFinishedThere) {
  EXPECT_EQ(a.routes.routed.size(), 1u) << "the leader drained two";
  EXPECT_EQ(b.routes.routed.size(), 1u) << "the follower sends nothing new to the two the leader drains";
  EXPECT_EQ(b.routes.draining.size(), 2u);
  EXPECT_EQ(fleet.replicas.size(), 3u) << "stopped while the follower still had requests there";
  EXPECT_EQ(a.stops, 0);

  b.routes.finish_drains();
  tick(4);
  EXPECT_EQ(fleet.replicas.size(), 1u);
  EXPECT_EQ(a.stops, 2);
  EXPECT_EQ(b.routes.routed.size(), 1u);
  EXPECT_FALSE(died_reported(b)) << "the leader's scale-down is not a fault on the follower";
}

TEST_F(FileLockScaleDown, AFollowerThatStopsPublishingHoldsNothing) {
  ASSERT_EQ(fleet.replicas.size(), 3u);
  now += 4;  // b hangs: its list goes stale (3 s)
  for (int i = 0; i < 2; ++i, now += 0.5) a.scaler->tick();
  EXPECT_EQ(fleet.replicas.size(), 1u);
  EXPECT_EQ(a.stops, 2);
}

// A follower that is gone for good (its host moved, its identity with it) leaves its list
// behind: the leader ignores it once stale and removes it once ten times that, so the lock's
// directory does not fill with the lists of every gateway that ever ran.
TEST_F(FileLockScaleDown, AListLongStaleIsRemovedAndAFreshOneIsKept) {
  const auto b_list = lock.string() + ".replicas.json.held-by.gw-b";
  ASSERT_TRUE(std::filesystem::exists(b_list));
  now += 20;  // stale (3 s), not yet ten times that
  a.scaler->tick();
  EXPECT_TRUE(std::filesystem::exists(b_list));
  EXPECT_EQ(fleet.replicas.size(), 1u) << "a stale list holds nothing";
  now += 11;  // 31 s
  a.scaler->tick();
  EXPECT_FALSE(std::filesystem::exists(b_list));
  b.scaler->tick();  // b is back: it writes its list again, and a keeps that one
  a.scaler->tick();
  EXPECT_TRUE(std::filesystem::exists(b_list));
}

}  // namespace
}  // namespace tidegate::scaler
