// The process actuator with real children: python3's http.server stands in for a model
// server (GET /health is 200 once it serves a directory holding a file named "health").
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "tidegate/scaler/actuators.h"

namespace tidegate::scaler {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto s = ss.str();
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

struct ProcessTest : ::testing::Test {
  std::string dir;
  void SetUp() override {
    if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "python3 not installed";
    dir = ::testing::TempDir() + "scaler_process_" + std::to_string(::getpid());
    ::mkdir(dir.c_str(), 0755);
    std::ofstream(dir + "/health") << "ok\n";
  }
  ProcessActuatorConfig config() {
    ProcessActuatorConfig c;
    c.model = "m";
    c.command = {"/bin/sh", "-c",
                 "echo $$ > " + dir + "/{replica}.pid; echo \"$CUDA_VISIBLE_DEVICES {model}\" > " + dir +
                     "/{replica}.env; exec /usr/bin/python3 -m http.server {port} --bind 127.0.0.1 --directory " + dir};
    c.env = {{"CUDA_VISIBLE_DEVICES", "{gpu}"}};
    c.gpus = {3, 5};
    // Below Linux's ephemeral range (32768-60999 by default): a port there can be taken by any
    // test's outgoing connection between the actuator's check and the child's bind, and the
    // child then exits at once (seen under CI load).
    c.port_from = 20000 + (::getpid() % 10000);
    c.port_to = c.port_from + 50;
    c.stop_grace_s = 3;
    c.log_dir = dir;  // a child that dies says why in a failure message
    return c;
  }
  // Observes until `pred` holds or 20 s (times TIDEGATE_TEST_SLOWDOWN) pass. On a timeout the
  // failure lists what was observed and the children's logs; callers ASSERT on the result
  // before indexing it.
  template <class Pred>
  PoolObservation wait_for(Actuator& a, Pred pred) {
    const char* slow = std::getenv("TIDEGATE_TEST_SLOWDOWN");
    const int rounds = 200 * std::max(1, slow ? std::atoi(slow) : 1);
    PoolObservation obs;
    std::string seen;
    for (int i = 0; i < rounds; ++i) {
      obs = a.observe();
      for (const auto& r : obs.replicas)
        if (r.exited) seen += r.id + " exited (" + r.detail + "): " + slurp(dir + "/" + r.id + ".log") + "\n";
      if (pred(obs)) return obs;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (const auto& r : obs.replicas) seen += r.id + (r.ready ? " ready\n" : " not ready\n");
    ADD_FAILURE() << "condition not reached; observed:\n" << seen;
    return obs;
  }
};

TEST_F(ProcessTest, StartsWaitsForHealthSubstitutesAndStops) {
  auto a = make_process_actuator(config());
  ASSERT_TRUE(a->start(false));
  ASSERT_TRUE(a->start(false));
  auto obs = a->observe();
  ASSERT_EQ(obs.replicas.size(), 2u);
  obs = wait_for(*a, [](const PoolObservation& o) {
    return o.replicas.size() == 2 && o.replicas[0].ready && o.replicas[1].ready;
  });
  ASSERT_EQ(obs.replicas.size(), 2u);
  const auto c = config();
  for (const auto& r : obs.replicas) {
    EXPECT_GE(r.endpoint.port, c.port_from);
    EXPECT_LE(r.endpoint.port, c.port_to);
  }
  EXPECT_NE(obs.replicas[0].endpoint.port, obs.replicas[1].endpoint.port);
  EXPECT_EQ(slurp(dir + "/m-1.env"), "3 m");
  EXPECT_EQ(slurp(dir + "/m-2.env"), "5 m") << "second replica on the least loaded GPU";

  const pid_t pid1 = std::stoi(slurp(dir + "/m-1.pid"));
  a->stop("m-1");
  obs = a->observe();
  ASSERT_EQ(obs.replicas.size(), 1u) << "a stopped replica is no longer reported";
  for (int i = 0; i < 100 && ::kill(pid1, 0) == 0; ++i) {
    a->observe();  // reaps
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(::kill(pid1, 0), 0) << "SIGTERM ended and reaped the child";
}

TEST_F(ProcessTest, DeathIsReportedOnce) {
  auto a = make_process_actuator(config());
  ASSERT_TRUE(a->start(false));
  wait_for(*a, [](const PoolObservation& o) { return o.replicas.size() == 1 && o.replicas[0].ready; });
  const pid_t pid = std::stoi(slurp(dir + "/m-1.pid"));
  ::kill(pid, SIGKILL);
  const auto obs = wait_for(*a, [](const PoolObservation& o) { return !o.replicas.empty() && o.replicas[0].exited; });
  ASSERT_FALSE(obs.replicas.empty());
  EXPECT_EQ(obs.replicas[0].detail, "killed by signal 9");
  EXPECT_TRUE(a->observe().replicas.empty());
}

TEST_F(ProcessTest, NeverHealthyStaysNotReadyAndStopsPromptly) {
  auto c = config();
  c.command = {"sleep", "30"};
  auto a = make_process_actuator(c);
  ASSERT_TRUE(a->start(false));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto obs = a->observe();
  ASSERT_EQ(obs.replicas.size(), 1u);
  EXPECT_FALSE(obs.replicas[0].ready);
  EXPECT_FALSE(obs.replicas[0].exited);
  a->stop(obs.replicas[0].id);
  const auto t0 = std::chrono::steady_clock::now();
  a.reset();  // the destructor waits for its children
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

TEST_F(ProcessTest, SpawnFailureIsCounted) {
  auto c = config();
  c.command = {"/nonexistent/tidegate-model-server"};
  auto a = make_process_actuator(c);
  EXPECT_FALSE(a->start(false));
  EXPECT_EQ(a->stats().errors, 1u);
  EXPECT_NE(a->stats().last_error.find("spawn"), std::string::npos);
}

TEST(Substitute, ReplacesKnownPlaceholdersOnly) {
  EXPECT_EQ(substitute("--port {port} {unknown} {", {{"port", "8000"}}), "--port 8000 {unknown} {");
}

}  // namespace
}  // namespace tidegate::scaler
