// The live Scaler object with an injected actuator and clock: metrics, admin state,
// run-time limits, and the tick thread.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "tidegate/scaler/scaler.h"

namespace tidegate::scaler {
namespace {

// Replicas become ready on the first observation after start (an instant cold start).
class InstantActuator final : public Actuator {
 public:
  std::string_view kind() const override { return "instant"; }
  bool elastic() const override { return true; }
  bool start(bool) override {
    live.push_back({"r" + std::to_string(++n), {"127.0.0.1", static_cast<std::uint16_t>(9000 + n)}, true, false, {}});
    return true;
  }
  void stop(const std::string& id) override {
    std::erase_if(live, [&](const ObservedReplica& r) { return r.id == id; });
  }
  PoolObservation observe() override { return {live, 0}; }
  ActuatorStats stats() const override { return {3, 5, "boom"}; }
  std::vector<ObservedReplica> live;
  int n = 0;
};

class Gateway final : public RoutingTarget, public SignalSource {
 public:
  std::atomic<int> demand{0};
  void activate(const std::string&, const std::string&, const Endpoint&) override {}
  void drain(const std::string&, const std::string&, std::function<void()> done) override { done(); }
  void remove(const std::string&, const std::string&) override {}
  GatewaySignals sample(const std::string&) const override {
    GatewaySignals g;
    g.queue_depth = static_cast<std::size_t>(demand.load());
    return g;
  }
};

std::shared_ptr<const ScalerConfig> config() {
  return parse_scaler_config(YAML::Load(R"(
tick: 100ms
pools:
  - model: m
    actuator: {kind: static}
    signals: {engine_metrics: false, nvml: false}
    policy:
      min_replicas: 1
      max_replicas: 5
      targets: {concurrency_per_replica: 10}
      scale_down_stabilization: 0s
)"),
                             "scaler");
}

struct ScalerTest : ::testing::Test {
  Gateway gw;
  prometheus::Registry registry;
  double now = 100;
  std::unique_ptr<Scaler> make() {
    ScalerOptions o;
    o.clock = [this] { return now; };
    o.make_actuator = [](const ModelPoolConfig&) { return std::make_unique<InstantActuator>(); };
    return std::make_unique<Scaler>(config(), gw, &gw, &registry, o);
  }
  std::string metrics() { return prometheus::TextSerializer().Serialize(registry.Collect()); }
};

TEST_F(ScalerTest, TickDecidesActsAndExports) {
  auto s = make();
  gw.demand = 25;
  s->tick();
  s->tick();  // started replicas are ready on the next observation
  EXPECT_EQ(s->counts("m").active, 3);
  const auto text = metrics();
  EXPECT_NE(text.find(R"(tidegate_replicas{model="m",state="active"} 3)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(tidegate_scaler_desired_replicas{model="m"} 3)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(tidegate_scaler_decisions_total{direction="up",model="m",reason="from_zero"})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(tidegate_scaler_actuator_errors_total{model="m"} 3)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(tidegate_scaler_signal{model="m",signal="concurrency"} 25)"), std::string::npos) << text;

  const auto state = s->admin_state();
  const auto& pool = state.at("pools").as_array().at(0).as_object();
  EXPECT_EQ(pool.at("model").as_string(), "m");
  EXPECT_EQ(pool.at("replicas").as_array().size(), 3u);
  EXPECT_EQ(pool.at("actuator_last_error").as_string(), "boom");
  const auto& last = pool.at("decisions").as_array().at(0).as_object();  // most recent first
  EXPECT_EQ(last.at("desired").as_int64(), 3);
  EXPECT_FALSE(last.at("reason").as_string().empty());
  EXPECT_EQ(last.at("inputs").at("concurrency").as_double(), 25);
  EXPECT_TRUE(last.at("inputs").at("kv_usage").is_null());
  EXPECT_EQ(last.at("signals").as_array().at(0).at("signal").as_string(), "concurrency");
}

TEST_F(ScalerTest, ReasonLabelsStayWithinTheBoundedSet) {
  auto s = make();
  for (int i = 0; i < 30; ++i) {
    gw.demand = (i * 37) % 90;
    now += 1;
    s->tick();
  }
  for (const auto& d : s->recent_decisions("m")) {
    bool known = false;
    for (auto code : kReasonCodes) known = known || code == d.reason_code;
    EXPECT_TRUE(known) << d.reason_code;
  }
}

TEST_F(ScalerTest, LimitsChangeAtRunTime) {
  auto s = make();
  s->tick();
  s->tick();
  ASSERT_EQ(s->counts("m").active, 1);
  std::string error;
  EXPECT_FALSE(s->set_limits("m", 4, 2, &error));
  EXPECT_NE(error.find("min_replicas"), std::string::npos) << error;
  EXPECT_FALSE(s->set_limits("nope", 1, 2, &error));
  EXPECT_FALSE(s->set_limits("m", 0, 2, &error)) << "0 needs scale_to_zero";
  ASSERT_TRUE(s->set_limits("m", 3, 4));
  now += 1;
  s->tick();
  EXPECT_EQ(s->recent_decisions("m").back().desired, 3);
  EXPECT_EQ(s->recent_decisions("m").back().reason_code, "min_replicas");
  EXPECT_EQ(s->admin_state().at("pools").as_array()[0].at("limits").at("min_replicas").as_int64(), 3);
}

TEST_F(ScalerTest, ThreadTicksUntilStopped) {
  auto s = make();
  s->start();
  for (int i = 0; i < 100 && s->recent_decisions("m").size() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  s->stop();
  const auto n = s->recent_decisions("m").size();
  EXPECT_GE(n, 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_EQ(s->recent_decisions("m").size(), n) << "no ticks after stop";
  EXPECT_EQ(s->counts("m").active, 0) << "stop() stopped the replicas";
}

}  // namespace
}  // namespace tidegate::scaler
