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

#include "decision_log.h"
#include "tidegate/scaler/scaler.h"

namespace tidegate::scaler {
namespace {
namespace json = boost::json;

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

constexpr const char* kConfig = R"(
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
)";

std::shared_ptr<const ScalerConfig> config(const std::string& text = kConfig) {
  return parse_scaler_config(YAML::Load(text), "scaler");
}

struct ScalerTest : ::testing::Test {
  Gateway gw;
  prometheus::Registry registry;
  double now = 100;
  std::string engine_body;  // what every replica's /metrics serves
  std::unique_ptr<Scaler> make(const std::string& text = kConfig) {
    ScalerOptions o;
    o.clock = [this] { return now; };
    o.wall_clock = [this] { return 1700000000 + now; };  // 2023-11-14T22:13:20Z + now
    o.make_actuator = [](const ModelPoolConfig&) { return std::make_unique<InstantActuator>(); };
    o.fetch = [this](const std::string&) { return std::optional(engine_body); };
    return std::make_unique<Scaler>(config(text), gw, &gw, &registry, o);
  }
  // Ticks behind the admin list (held decisions are collapsed into counts).
  std::uint64_t ticks(const Scaler& s) {
    std::uint64_t n = 0;
    const auto state = s.admin_state();  // alive through the loop
    for (const auto& d : state.at("pools").as_array()[0].at("decisions").as_array()) n += d.at("count").as_uint64();
    return n;
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

// A replica started for demand that is ready by the next tick is capacity on its way: a dip in
// that tick is held by the scale-down stabilisation like any other, not answered by stopping
// the replica just started (the surplus path did: a start thrown away, and in a shared fleet
// the streams other gateways had already sent there were cut).
TEST_F(ScalerTest, AStartReadyByTheNextTickIsHeldThroughADip) {
  std::string text = kConfig;
  text.replace(text.find("scale_down_stabilization: 0s"), 28,
               "scale_down_stabilization: 60s\n      stable_window: 0.1s\n      panic_window: 0.1s");
  auto s = make(text);
  gw.demand = 15;  // 2 replicas
  for (int i = 0; i < 3; ++i, now += 0.1) s->tick();
  ASSERT_EQ(s->counts("m").active, 2);
  gw.demand = 60;  // a burst: more replicas
  s->tick();
  now += 0.5;  // past the demand windows: the next tick sees only the dip
  const auto asked = s->counts("m");
  ASSERT_GT(asked.warm + asked.starting, 0) << "a start for the burst";
  gw.demand = 15;  // and at once a dip
  for (int i = 0; i < 3; ++i, now += 0.1) s->tick();
  const auto after = s->counts("m");
  EXPECT_EQ(after.active, asked.active + asked.warm + asked.starting) << "the replicas started for the burst were stopped";
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
  for (int i = 0; i < 100 && ticks(*s) < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  s->stop();
  const auto n = ticks(*s);
  EXPECT_GE(n, 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_EQ(ticks(*s), n) << "no ticks after stop";
  EXPECT_EQ(s->counts("m").active, 0) << "stop() stopped the replicas";
}

TEST_F(ScalerTest, DecisionsCarryWallClockTimesAndHoldsCollapse) {
  auto s = make();
  gw.demand = 25;
  s->tick();  // up to 3 (from zero); ready by the end of the tick ...
  now += 1, s->tick();  // ... so the next tick holds them as capacity on its way and promotes them
  for (int i = 0; i < 299; ++i) now += 1, s->tick();  // five minutes of the same hold
  auto pool = s->admin_state().at("pools").as_array()[0].as_object();
  auto decisions = pool.at("decisions").as_array();
  // Newest first: the target-tracking hold, the panic hold before it (the panic window lasts a
  // minute), the hold that promoted the three, and the up.
  ASSERT_EQ(decisions.size(), 4u) << json::serialize(decisions);
  const auto& hold = decisions[0].as_object();
  EXPECT_EQ(hold.at("direction").as_string(), "hold");
  EXPECT_EQ(hold.at("reason_code").as_string(), "target_tracking");
  EXPECT_EQ(hold.at("count").as_uint64(), 241u);
  EXPECT_DOUBLE_EQ(hold.at("first_t").as_double(), 1700000160);
  EXPECT_EQ(hold.at("first_time").as_string(), "2023-11-14T22:16:00.000Z");
  EXPECT_DOUBLE_EQ(hold.at("t").as_double(), 1700000400);
  EXPECT_EQ(hold.at("time").as_string(), "2023-11-14T22:20:00.000Z");
  EXPECT_DOUBLE_EQ(hold.at("t_monotonic").as_double(), 400) << "the clock replica `since` times are on";
  EXPECT_EQ(decisions[1].at("reason_code").as_string(), "panic");
  EXPECT_EQ(decisions[1].at("count").as_uint64(), 58u);
  EXPECT_EQ(decisions[2].at("direction").as_string(), "hold");
  const auto& up = decisions[3].as_object();
  EXPECT_EQ(up.at("direction").as_string(), "up");
  EXPECT_EQ(up.at("time").as_string(), "2023-11-14T22:15:00.000Z");
  EXPECT_EQ(up.at("count").as_uint64(), 1u);
  EXPECT_EQ(pool.at("changes").as_array().size(), 1u);
  EXPECT_FALSE(pool.at("replicas").as_array()[0].at("since_time").as_string().empty());
  EXPECT_EQ(s->admin_state().at("now").at("time").as_string(), "2023-11-14T22:20:00.000Z");
}

Decision decision(double t, Direction dir, int desired, const char* code) {
  Decision d;
  d.t = t;
  d.direction = dir;
  d.desired = d.active = desired;
  d.reason_code = code;
  d.reason = std::string(code) + " at " + std::to_string(t);  // numbers differ tick to tick
  return d;
}

TEST(DecisionLogTest, RealDecisionsOutliveHoldsInAShortList) {
  DecisionLog log(4);
  auto push = [&](double t, Direction dir, int desired, const char* code) {
    log.push(decision(t, dir, desired, code), 1700000000 + t);
  };
  push(0, Direction::kUp, 3, "from_zero");
  for (int t = 1; t <= 100; ++t) push(t, Direction::kHold, 3, "within_tolerance");
  ASSERT_EQ(log.records().size(), 2u);
  EXPECT_EQ(log.records().back().count, 100u);
  EXPECT_DOUBLE_EQ(log.records().back().first_wall_s, 1700000001);
  EXPECT_DOUBLE_EQ(log.records().back().wall_s, 1700000100);
  EXPECT_EQ(log.records().back().decision.reason, "within_tolerance at 100.000000") << "the latest is kept";
  // Holds that differ (the reason code flips) do not collapse; they go before any real one.
  push(101, Direction::kDown, 2, "target_tracking");
  for (int t = 102; t < 140; ++t) push(t, Direction::kHold, 2, t % 2 ? "within_tolerance" : "stabilised");
  push(140, Direction::kUp, 4, "panic");
  push(141, Direction::kHold, 4, "within_tolerance");
  ASSERT_EQ(log.records().size(), 4u);
  EXPECT_EQ(log.records()[0].decision.reason_code, "from_zero");
  EXPECT_EQ(log.records()[1].decision.direction, Direction::kDown);
  EXPECT_EQ(log.records()[2].decision.reason_code, "panic");
  EXPECT_EQ(log.records()[3].decision.t, 141) << "the newest record is never evicted";
  // Only real decisions left: the oldest of them goes.
  for (int t = 142; t < 146; ++t) push(t, t % 2 ? Direction::kUp : Direction::kDown, 5 + t % 2, "target_tracking");
  ASSERT_EQ(log.records().size(), 4u);
  EXPECT_EQ(log.records()[0].decision.t, 142);
  EXPECT_EQ(iso8601_utc(1700000000.2504), "2023-11-14T22:13:20.250Z");
  EXPECT_EQ(iso8601_utc(1700000000.9996), "2023-11-14T22:13:21.000Z");
}

TEST_F(ScalerTest, ATargetWithoutItsSignalIsMissingUntilItIsBack) {
  auto s = make(R"(
tick: 100ms
pools:
  - model: m
    actuator: {kind: static}
    signals: {engine_metrics: true, nvml: false, missing_warn_every: 60s}
    policy:
      min_replicas: 1
      max_replicas: 5
      targets: {concurrency_per_replica: 10, kv_usage: 0.8}
)");
  engine_body = "llamacpp:requests_processing 2\nllamacpp:requests_deferred 1\n";
  gw.demand = 5;
  for (int i = 0; i < 130; ++i) now += 1, s->tick();
  EXPECT_NE(metrics().find(R"(tidegate_scaler_signal_missing{model="m",signal="kv_usage"} 1)"), std::string::npos)
      << metrics();
  const auto missing = s->admin_state().at("pools").as_array()[0].at("missing_signals").as_array();
  const json::object* kv = nullptr;
  for (const auto& m : missing)
    if (m.at("signal").as_string() == "kv_usage") kv = &m.as_object();
  ASSERT_TRUE(kv) << json::serialize(missing);
  EXPECT_EQ(kv->at("needed_by").as_array().at(0).as_string(), "policy.targets.kv_usage");
  EXPECT_EQ(kv->at("warnings").as_uint64(), 3u) << "first seen, then every 60 s";
  EXPECT_GE(kv->at("missing_for_s").as_double(), 120);

  engine_body += "vllm:kv_cache_usage_perc 0.5\n";
  now += 1, s->tick();
  EXPECT_NE(metrics().find(R"(tidegate_scaler_signal_missing{model="m",signal="kv_usage"} 0)"), std::string::npos)
      << metrics();
  const auto after = s->admin_state();
  for (const auto& m : after.at("pools").as_array()[0].at("missing_signals").as_array())
    EXPECT_NE(m.at("signal").as_string(), "kv_usage");
}

}  // namespace
}  // namespace tidegate::scaler
