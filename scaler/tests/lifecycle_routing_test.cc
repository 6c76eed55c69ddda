// The controller's view against a routing target that behaves like the gateway's pool
// (activate re-admits a draining replica; on_drained fires when in-flight reaches zero;
// remove forgets), over long random walks of demand, readiness, request completions and
// crashes. After every step, "active" in the controller must mean "routed" at the target:
// a replica the controller counts as active but the gateway does not route is capacity that
// holds queued requests forever.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "tidegate/scaler/lifecycle.h"

namespace tidegate::scaler {
namespace {

struct ModelRouting final : RoutingTarget {
  struct Entry {
    bool draining = false;
    int in_flight = 0;
    std::function<void()> on_drained;
  };
  std::map<std::string, Entry> table;

  void activate(const std::string&, const std::string& id, const Endpoint&) override {
    auto& e = table[id];
    e.draining = false;
    e.on_drained = nullptr;
  }
  void drain(const std::string&, const std::string& id, std::function<void()> done) override {
    auto it = table.find(id);
    if (it == table.end() || it->second.in_flight == 0) {
      if (it != table.end()) it->second.draining = true;
      done();
      return;
    }
    it->second.draining = true;
    it->second.on_drained = std::move(done);
  }
  void remove(const std::string&, const std::string& id) override { table.erase(id); }

  std::set<std::string> routed() const {
    std::set<std::string> out;
    for (const auto& [id, e] : table)
      if (!e.draining) out.insert(id);
    return out;
  }
  void complete_one(const std::string& id) {
    auto it = table.find(id);
    if (it == table.end() || it->second.in_flight == 0) return;
    if (--it->second.in_flight == 0 && it->second.draining && it->second.on_drained) {
      auto cb = std::move(it->second.on_drained);
      it->second.on_drained = nullptr;
      cb();
    }
  }
};

struct SlowActuator final : Actuator {
  struct Proc {
    int ready_at = 0;
    bool exited = false;
  };
  std::map<std::string, Proc> procs;
  int step = 0;
  int next = 0;
  int load_steps = 3;

  std::string_view kind() const override { return "slow"; }
  bool elastic() const override { return true; }
  bool start(bool) override {
    procs["r" + std::to_string(++next)] = {step + load_steps, false};
    return true;
  }
  void stop(const std::string& id) override { procs.erase(id); }
  PoolObservation observe() override {
    PoolObservation o;
    for (const auto& [id, p] : procs)
      o.replicas.push_back({id, {"127.0.0.1", 9000}, step >= p.ready_at, p.exited, p.exited ? "killed" : ""});
    std::erase_if(procs, [](const auto& kv) { return kv.second.exited; });
    return o;
  }
  ActuatorStats stats() const override { return {}; }
};

std::set<std::string> in_state(const PoolController& pool, ReplicaState s) {
  std::set<std::string> out;
  for (const auto& r : pool.replicas())
    if (r.state == s) out.insert(r.id);
  return out;
}

void walk(unsigned seed, int warm_pool, double drain_timeout) {
  std::mt19937 rng(seed);
  SlowActuator act;
  ModelRouting routing;
  LifecycleConfig c;
  c.warm_pool_size = warm_pool;
  c.startup_timeout_s = 1000;
  c.drain_timeout_s = drain_timeout;
  PoolController pool("m", "gpu", c, act, routing);
  int desired = 1;
  for (int t = 0; t < 400; ++t) {
    act.step = t;
    if (rng() % 4 == 0) desired = static_cast<int>(rng() % 5);
    // Traffic lands on routed replicas only; some of it finishes every step.
    for (const auto& id : routing.routed())
      routing.table[id].in_flight += static_cast<int>(rng() % 3);
    for (auto& [id, e] : std::map<std::string, ModelRouting::Entry>(routing.table))
      for (int k = 0, n = static_cast<int>(rng() % 3); k < n; ++k) routing.complete_one(id);
    if (rng() % 40 == 0 && !act.procs.empty()) {
      auto it = act.procs.begin();
      std::advance(it, rng() % act.procs.size());
      it->second.exited = true;
    }
    pool.step(t, desired);
    const auto active = in_state(pool, ReplicaState::kActive);
    ASSERT_EQ(active, routing.routed()) << "seed " << seed << " step " << t;
    for (const auto& id : in_state(pool, ReplicaState::kWarm))
      ASSERT_EQ(routing.table.count(id), 0u) << "warm replica " << id << " still known to routing; seed " << seed
                                             << " step " << t;
  }
}

// The replay's stall (issue 5 follow-up): replicas already running and ready when the controller
// first looks are adopted as warm; the first step must activate the desired ones through the
// routing target and nothing may deactivate them afterwards. (The replay's VirtualPool re-took
// its "initially routed" snapshot on the step's second observe() and drained exactly these.)
TEST(LifecycleRouting, ReplicasFoundReadyAtTheFirstStepAreActivatedAndStayRouted) {
  SlowActuator act;
  act.load_steps = 0;
  act.start(false);
  act.start(false);
  ModelRouting routing;
  LifecycleConfig c;
  c.warm_pool_size = 1;
  PoolController pool("m", "gpu", c, act, routing);
  pool.step(0, 2);
  EXPECT_EQ(in_state(pool, ReplicaState::kActive), (std::set<std::string>{"r1", "r2"}));
  EXPECT_EQ(routing.routed(), (std::set<std::string>{"r1", "r2"}));
  for (int t = 1; t < 5; ++t) {
    act.step = t;
    pool.step(t, 2);
    EXPECT_EQ(routing.routed(), (std::set<std::string>{"r1", "r2"})) << "step " << t;
  }
  EXPECT_EQ(pool.counts().warm, 1);
}

TEST(LifecycleRouting, ActiveMeansRoutedWithAWarmPoolOfOne) {
  for (unsigned seed = 1; seed <= 40; ++seed) walk(seed, 1, 1000);
}

TEST(LifecycleRouting, ActiveMeansRoutedWithDrainTimeouts) {
  for (unsigned seed = 1; seed <= 40; ++seed) walk(seed, 1, 2);
}

TEST(LifecycleRouting, ActiveMeansRoutedWithoutAWarmPool) {
  for (unsigned seed = 1; seed <= 40; ++seed) walk(seed, 0, 5);
}

TEST(LifecycleRouting, ActiveMeansRoutedWithALargeWarmPool) {
  for (unsigned seed = 1; seed <= 40; ++seed) walk(seed, 3, 3);
}

}  // namespace
}  // namespace tidegate::scaler
