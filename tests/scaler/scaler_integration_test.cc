// The live Scaler with the process actuator and real tidegate-sim replicas (3 s cold start),
// a fake gateway (routing target + signal source) in the test. Demand steps 1 -> 64
// concurrent streams with a target of 16 per replica (4 replicas wanted).
#include <gtest/gtest.h>
#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "http_client.h"
#include "tidegate/scaler/scaler.h"

namespace tidegate::scaler {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The gateway's side, played by the test. Draining replicas finish a real in-flight
// completion before on_drained fires, so a cut generation would fail the request.
class FakeGateway final : public RoutingTarget, public SignalSource {
 public:
  std::atomic<int> demand{1};
  std::atomic<int> failed_requests{0};
  std::atomic<int> drained_requests{0};

  ~FakeGateway() override {
    for (auto& t : threads_) t.join();
  }
  void activate(const std::string&, const std::string& id, const Endpoint& e) override {
    std::lock_guard lock(mu_);
    routed_[id] = e;
    activations_.emplace_back(id, Clock::now());
  }
  void drain(const std::string& model, const std::string& id, std::function<void()> on_drained) override {
    std::lock_guard lock(mu_);
    const Endpoint e = routed_.at(id);
    routed_.erase(id);
    threads_.emplace_back([this, model, e, id, done = std::move(on_drained)] {
      const auto r = http::request(
          "POST", "http://" + e.host + ":" + std::to_string(e.port) + "/v1/chat/completions",
          {{"Content-Type", "application/json"}},
          R"({"model":")" + model + R"(","max_tokens":12,"messages":[{"role":"user","content":"hi"}]})", 10);
      if (!r.ok() || r.status != 200 || r.body.find("\"choices\"") == std::string::npos) ++failed_requests;
      else ++drained_requests;
      {
        std::lock_guard lock(mu_);
        drained_at_[id] = Clock::now();
      }
      done();
    });
  }
  void remove(const std::string&, const std::string& id) override {
    std::lock_guard lock(mu_);
    routed_.erase(id);
    removed_.push_back(id);
  }
  GatewaySignals sample(const std::string&) const override {
    GatewaySignals g;
    g.in_flight = static_cast<std::size_t>(demand.load());
    return g;
  }
  std::size_t routed() const {
    std::lock_guard lock(mu_);
    return routed_.size();
  }
  std::map<std::string, Endpoint> routed_set() const {
    std::lock_guard lock(mu_);
    return routed_;
  }
  std::vector<std::string> removed() const {
    std::lock_guard lock(mu_);
    return removed_;
  }
  std::map<std::string, Clock::time_point> drained_at() const {
    std::lock_guard lock(mu_);
    return drained_at_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Endpoint> routed_;
  std::vector<std::pair<std::string, Clock::time_point>> activations_;
  std::vector<std::string> removed_;
  std::map<std::string, Clock::time_point> drained_at_;
  std::vector<std::thread> threads_;
};

struct Transition {
  std::string id;
  ReplicaState state;
  Clock::time_point at;
};

struct ScalerIntegration : ::testing::Test {
  FakeGateway gateway;
  std::mutex mu;
  std::vector<Transition> transitions;

  void SetUp() override {
    if (::access(TIDEGATE_SIM_PATH, X_OK) != 0) GTEST_SKIP() << "tidegate-sim not built at " << TIDEGATE_SIM_PATH;
  }

  std::shared_ptr<const ScalerConfig> config(int warm_pool, int startup_ms, double startup_timeout_s = 20) {
    const int base = 40000 + static_cast<int>(::getpid() % 200) * 100;
    std::ostringstream y;
    y << "tick: 200ms\n"
         "pools:\n"
         "  - model: m\n"
         "    actuator:\n"
         "      kind: process\n"
         "      command: ["
      << TIDEGATE_SIM_PATH << ", --port, '{port}', --model, m, --startup-ms, '" << startup_ms
      << "', --ttft-ms, '50', --tpot-ms, '40']\n"
         "      ports: "
      << base << "-" << base + 99
      << "\n"
         "      stop_grace: 3s\n"
         "    lifecycle: {warm_pool_size: "
      << warm_pool << ", startup_timeout: " << startup_timeout_s
      << "s}\n"
         "    signals: {engine_metrics: true, nvml: false}\n"
         "    policy:\n"
         "      min_replicas: 1\n"
         "      max_replicas: 6\n"  // 4 routed + the warm pool of 2, which counts within it
         "      targets: {concurrency_per_replica: 16}\n"
         "      stable_window: 2s\n"
         "      panic_window: 1s\n"
         "      scale_down_stabilization: 3s\n";
    return parse_scaler_config(YAML::Load(y.str()), "scaler");
  }

  std::unique_ptr<Scaler> make(std::shared_ptr<const ScalerConfig> cfg) {
    ScalerOptions o;
    o.listener = [this](const std::string& id, const std::string&, const std::string&, ReplicaState s, double) {
      std::lock_guard lock(mu);
      transitions.push_back({id, s, Clock::now()});
    };
    return std::make_unique<Scaler>(cfg, gateway, &gateway, nullptr, o);
  }

  // Polls until pred() or the deadline; returns whether it held.
  template <class Pred>
  bool wait(double seconds, Pred pred) {
    const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (Clock::now() < end) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return pred();
  }
};

TEST_F(ScalerIntegration, WarmPoolRisesWithinTwoSecondsThenReturnsToMin) {
  auto scaler = make(config(2, 3000));
  scaler->start();
  ASSERT_TRUE(wait(25, [&] { return scaler->counts("m").active == 1 && scaler->counts("m").warm == 2; }))
      << json::serialize(scaler->admin_state());
  const auto step = Clock::now();
  gateway.demand = 64;
  ASSERT_TRUE(wait(10, [&] { return gateway.routed() >= 3; }));
  const double rise = secs(step, Clock::now());
  EXPECT_LT(rise, 2.0) << "warm replicas are promoted, not cold-started";
  ASSERT_TRUE(wait(25, [&] { return gateway.routed() == 4 && scaler->counts("m").warm == 2; }))
      << json::serialize(scaler->admin_state());

  // Every decision is explained.
  const auto decisions = scaler->recent_decisions("m");
  bool saw_panic = false;
  for (const auto& d : decisions) {
    EXPECT_FALSE(d.reason.empty());
    saw_panic = saw_panic || d.reason_code == "panic";
  }
  EXPECT_TRUE(saw_panic);

  gateway.demand = 1;
  ASSERT_TRUE(wait(30, [&] { return scaler->counts("m").active == 1 && scaler->counts("m").draining == 0; }))
      << json::serialize(scaler->admin_state());
  EXPECT_EQ(gateway.failed_requests.load(), 0) << "no in-flight request cut by the scale-down";
  EXPECT_GE(gateway.drained_requests.load(), 3);
  // Stopped only after drained: compare each replica's drain completion to its stop.
  const auto drained = gateway.drained_at();
  {
    std::lock_guard lock(mu);
    int checked = 0;
    for (const auto& t : transitions) {
      if (t.state != ReplicaState::kStopped) continue;
      const auto it = drained.find(t.id);
      if (it == drained.end()) continue;
      EXPECT_GE(t.at, it->second) << t.id;
      ++checked;
    }
    EXPECT_GE(checked, 3);
  }
  const auto state = scaler->admin_state();
  EXPECT_EQ(state.at("pools").as_array()[0].at("actuator").as_string(), "process");
  // The simulator's vLLM metric names are all understood: nothing reported missing.
  EXPECT_TRUE(state.at("pools").as_array()[0].at("missing_signals").as_array().empty())
      << json::serialize(state.at("pools").as_array()[0].at("missing_signals"));
  const auto& last = state.at("pools").as_array()[0].at("decisions").as_array().at(0);
  EXPECT_DOUBLE_EQ(last.at("inputs").at("kv_usage").as_double(), 0.0) << "scraped from the replica";
  scaler->stop();
}

TEST_F(ScalerIntegration, WithoutWarmPoolTheRiseWaitsForColdStart) {
  auto scaler = make(config(0, 3000));
  scaler->start();
  ASSERT_TRUE(wait(25, [&] { return gateway.routed() == 1; }));
  const auto step = Clock::now();
  gateway.demand = 64;
  ASSERT_TRUE(wait(25, [&] { return gateway.routed() >= 2; })) << json::serialize(scaler->admin_state());
  const double rise = secs(step, Clock::now());
  EXPECT_GE(rise, 2.5) << "a 3 s model load cannot be skipped";
  ASSERT_TRUE(wait(15, [&] { return gateway.routed() == 4; }));
  // Starting replicas counted: exactly 3 more were started, not a second round.
  std::lock_guard lock(mu);
  int started = 0;
  for (const auto& t : transitions) started += t.state == ReplicaState::kStarting;
  EXPECT_EQ(started, 4);
}

TEST_F(ScalerIntegration, NeverHealthyReplicaIsReplacedAndReported) {
  auto scaler = make(config(0, 600000, 1.5));  // never loads within the 1.5 s timeout
  scaler->start();
  ASSERT_TRUE(wait(15, [&] {
    const auto s = scaler->admin_state();
    return s.at("pools").as_array()[0].at("faults").as_array().size() >= 2;
  }));
  const auto faults = scaler->admin_state().at("pools").as_array()[0].at("faults").as_array();
  EXPECT_EQ(faults[0].at("kind").as_string(), "startup_timeout");
  std::lock_guard lock(mu);
  std::set<std::string> ids;
  for (const auto& t : transitions) ids.insert(t.id);
  EXPECT_GE(ids.size(), 2u) << "replacements started";
}

pid_t pid_listening_on(int port) {
  DIR* d = ::opendir("/proc");
  pid_t found = -1;
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), {});
    if (cmd.find("tidegate-sim") != std::string::npos &&
        cmd.find(std::string("--port") + '\0' + std::to_string(port) + '\0') != std::string::npos)
      found = pid;
  }
  if (d) ::closedir(d);
  return found;
}

TEST_F(ScalerIntegration, ReplicaKilledWhileActiveIsRemovedAndReplaced) {
  auto scaler = make(config(1, 1000));
  scaler->start();
  ASSERT_TRUE(wait(20, [&] { return gateway.routed() == 1 && scaler->counts("m").warm == 1; }));
  const auto [victim, endpoint] = *gateway.routed_set().begin();
  const pid_t pid = pid_listening_on(endpoint.port);
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGKILL);
  ASSERT_TRUE(wait(10, [&] {
    const auto r = gateway.removed();
    return std::find(r.begin(), r.end(), victim) != r.end();
  }));
  ASSERT_TRUE(wait(10, [&] { return gateway.routed() == 1 && !gateway.routed_set().count(victim); }))
      << "the warm replica took over";
  // The admin snapshot is written at the end of a tick; wait for the tick that saw the death.
  auto faults_now = [&] { return scaler->admin_state().at("pools").as_array()[0].at("faults").as_array(); };
  ASSERT_TRUE(wait(5, [&] { return !faults_now().empty(); }));
  ASSERT_TRUE(wait(15, [&] { return scaler->counts("m").warm == 1 && scaler->counts("m").starting == 0; }))
      << "the pool refilled";
  const auto faults = faults_now();
  EXPECT_EQ(faults.back().at("kind").as_string(), "died");
  EXPECT_EQ(faults.back().at("replica").as_string(), victim);
}

}  // namespace
}  // namespace tidegate::scaler
