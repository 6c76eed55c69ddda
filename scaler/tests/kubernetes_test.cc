// The Kubernetes actuator against a loopback fake API server that serves the documented
// shapes: autoscaling/v1 Scale on apps/v1 deployments/{name}/scale, discovery.k8s.io/v1
// EndpointSliceList, and merge patches of pods.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <fstream>
#include <map>
#include <mutex>

#include "http_client.h"
#include "tidegate/scaler/actuators.h"
#include "tidegate/scaler/lifecycle.h"
#include "tidegate/testing/fake_http_server.h"

extern char** environ;

namespace tidegate::scaler {
namespace {

namespace json = boost::json;
using testing::FakeHttpServer;
using testing::FakeRequest;
using testing::FakeResponse;

struct Pod {
  std::string name, ip;
  bool ready = false;
  bool terminating = false;
};

// What the API server knows. Guarded: the server thread and the test both touch it.
struct Cluster {
  std::mutex mu;
  std::map<std::string, int> replicas{{"llm", 1}, {"llm-warm", 0}};
  std::map<std::string, std::vector<Pod>> pods;  // by service name
  std::vector<int> fail_patches;                 // statuses to answer the next scale PATCHes with
  bool fail_slices = false;
  bool autoscale_pods = false;  // create a not-ready pod for every replica added
  int next_ip = 10;

  FakeResponse handle(const FakeRequest& r) {
    std::lock_guard lock(mu);
    const std::string scale_prefix = "/apis/apps/v1/namespaces/ns1/deployments/";
    if (r.target.rfind(scale_prefix, 0) == 0 && r.target.size() > 6 &&
        r.target.compare(r.target.size() - 6, 6, "/scale") == 0) {
      const std::string name = r.target.substr(scale_prefix.size(), r.target.size() - scale_prefix.size() - 6);
      if (!replicas.count(name)) return {404, R"({"kind":"Status","status":"Failure","reason":"NotFound","code":404})"};
      if (r.method == "PATCH") {
        if (!fail_patches.empty()) {
          const int status = fail_patches.front();
          fail_patches.erase(fail_patches.begin());
          return {status, R"({"kind":"Status","status":"Failure","code":)" + std::to_string(status) + "}"};
        }
        const auto patch = json::parse(r.body).as_object();
        const int n = static_cast<int>(patch.at("spec").at("replicas").as_int64());
        while (autoscale_pods && n > replicas[name]) {
          pods[name].push_back({name + "-pod" + std::to_string(next_ip), "10.0.0." + std::to_string(next_ip)});
          ++next_ip;
          ++replicas[name];
        }
        replicas[name] = n;
      }
      return {200, json::serialize(json::object{
                       {"apiVersion", "autoscaling/v1"},
                       {"kind", "Scale"},
                       {"metadata", {{"name", name}, {"namespace", "ns1"}, {"resourceVersion", "7"}}},
                       {"spec", {{"replicas", replicas[name]}}},
                       {"status", {{"replicas", replicas[name]}, {"selector", "app=" + name}}}})};
    }
    const std::string slices = "/apis/discovery.k8s.io/v1/namespaces/ns1/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D";
    if (r.method == "GET" && r.target.rfind(slices, 0) == 0) {
      if (fail_slices) return {500, R"({"kind":"Status","code":500})"};
      const std::string svc = r.target.substr(slices.size());
      json::array eps;
      for (const auto& p : pods[svc])
        eps.push_back(json::object{
            {"addresses", json::array{json::value(p.ip)}},
            {"conditions", {{"ready", p.ready}, {"serving", p.ready}, {"terminating", p.terminating}}},
            {"targetRef", {{"kind", "Pod"}, {"namespace", "ns1"}, {"name", p.name}}}});
      json::object slice{{"metadata", {{"name", svc + "-abcde"}, {"labels", {{"kubernetes.io/service-name", svc}}}}},
                         {"addressType", "IPv4"},
                         {"endpoints", std::move(eps)},
                         {"ports", json::array{json::object{{"name", "metrics"}, {"port", 9090}, {"protocol", "TCP"}},
                                               json::object{{"name", "http"}, {"port", 8000}, {"protocol", "TCP"}}}}};
      return {200, json::serialize(json::object{{"apiVersion", "discovery.k8s.io/v1"},
                                                {"kind", "EndpointSliceList"},
                                                {"metadata", {{"resourceVersion", "42"}}},
                                                {"items", json::array{std::move(slice)}}})};
    }
    if (r.method == "PATCH" && r.target.rfind("/api/v1/namespaces/ns1/pods/", 0) == 0)
      return {200, R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}})"};
    return {404, R"({"kind":"Status","code":404})"};
  }
};

struct K8sTest : ::testing::Test {
  Cluster cluster;
  FakeHttpServer server{[this](const FakeRequest& r) { return cluster.handle(r); }};

  KubernetesActuatorConfig config() {
    KubernetesActuatorConfig c;
    c.model = "llama";
    c.api_server = server.url();
    c.token = "s3cret";
    c.ns = "ns1";
    c.deployment = c.service = "llm";
    c.warm_deployment = c.warm_service = "llm-warm";
    c.port_name = "http";
    c.backoff_initial_s = 0.01;
    c.backoff_max_s = 0.02;
    c.retries = 3;
    return c;
  }
  std::vector<FakeRequest> requests(const std::string& method) {
    std::vector<FakeRequest> out;
    for (auto& r : server.requests())
      if (r.method == method) out.push_back(r);
    return out;
  }
};

TEST_F(K8sTest, ObservationComesFromEndpointSlices) {
  cluster.replicas["llm"] = 3;
  cluster.pods["llm"] = {{"llm-a", "10.1.0.1", true}, {"llm-b", "10.1.0.2", false}};
  auto act = make_kubernetes_actuator(config());
  const auto obs = act->observe();
  ASSERT_EQ(obs.replicas.size(), 2u);
  EXPECT_EQ(obs.replicas[0].id, "llm-a");
  EXPECT_EQ(obs.replicas[0].endpoint.host, "10.1.0.1");
  EXPECT_EQ(obs.replicas[0].endpoint.port, 8000) << "port picked by name";
  EXPECT_TRUE(obs.replicas[0].ready);
  EXPECT_FALSE(obs.replicas[1].ready);
  EXPECT_EQ(obs.pending, 1) << "spec.replicas 3, two endpoints";
  for (const auto& r : server.requests()) EXPECT_EQ(r.headers.at("authorization"), "Bearer s3cret");
}

TEST_F(K8sTest, StartPatchesTheScaleSubresource) {
  auto act = make_kubernetes_actuator(config());
  ASSERT_TRUE(act->start(false));
  ASSERT_TRUE(act->start(true));
  const auto patches = requests("PATCH");
  ASSERT_EQ(patches.size(), 2u);
  EXPECT_EQ(patches[0].target, "/apis/apps/v1/namespaces/ns1/deployments/llm/scale");
  EXPECT_EQ(json::parse(patches[0].body), json::parse(R"({"spec":{"replicas":2}})"));
  EXPECT_EQ(patches[0].headers.at("content-type"), "application/merge-patch+json");
  EXPECT_EQ(patches[0].headers.at("authorization"), "Bearer s3cret");
  EXPECT_EQ(patches[1].target, "/apis/apps/v1/namespaces/ns1/deployments/llm-warm/scale");
  EXPECT_EQ(json::parse(patches[1].body), json::parse(R"({"spec":{"replicas":1}})"));
  std::lock_guard lock(cluster.mu);
  EXPECT_EQ(cluster.replicas["llm"], 2);
  EXPECT_EQ(cluster.replicas["llm-warm"], 1);
}

TEST_F(K8sTest, StopMarksThePodCheapestThenScalesDown) {
  cluster.replicas["llm"] = 2;
  cluster.pods["llm"] = {{"llm-a", "10.1.0.1", true}, {"llm-b", "10.1.0.2", true}};
  auto act = make_kubernetes_actuator(config());
  act->observe();
  act->stop("llm-b");
  const auto patches = requests("PATCH");
  ASSERT_EQ(patches.size(), 2u);
  EXPECT_EQ(patches[0].target, "/api/v1/namespaces/ns1/pods/llm-b");
  EXPECT_EQ(patches[0].headers.at("content-type"), "application/merge-patch+json");
  EXPECT_EQ(json::parse(patches[0].body).at("metadata").at("annotations").at("controller.kubernetes.io/pod-deletion-cost"),
            "-10000");
  EXPECT_EQ(json::parse(patches[1].body), json::parse(R"({"spec":{"replicas":1}})"));
  // The pod lingers in the slice while it terminates; it is not reported again.
  const auto obs = act->observe();
  ASSERT_EQ(obs.replicas.size(), 1u);
  EXPECT_EQ(obs.replicas[0].id, "llm-a");
  EXPECT_EQ(obs.pending, 0);
}

TEST_F(K8sTest, ConflictsAndServerErrorsAreRetriedWithBackoff) {
  cluster.fail_patches = {409, 500};
  auto act = make_kubernetes_actuator(config());
  ASSERT_TRUE(act->start(false));
  EXPECT_EQ(act->stats().retries, 2u);
  EXPECT_EQ(act->stats().errors, 0u);
  std::lock_guard lock(cluster.mu);
  EXPECT_EQ(cluster.replicas["llm"], 2);
}

TEST_F(K8sTest, PersistentErrorsSurfaceAndClientErrorsAreNotRetried) {
  cluster.fail_patches = {500, 500, 500, 500, 500};
  auto act = make_kubernetes_actuator(config());
  EXPECT_FALSE(act->start(false));
  EXPECT_EQ(act->stats().errors, 1u);
  EXPECT_EQ(act->stats().retries, 3u);
  EXPECT_NE(act->stats().last_error.find("HTTP 500"), std::string::npos) << act->stats().last_error;
  cluster.fail_patches = {403};
  EXPECT_FALSE(act->start(false));
  EXPECT_EQ(act->stats().retries, 3u) << "403 is final";
  EXPECT_EQ(act->stats().errors, 2u);
}

TEST_F(K8sTest, ApiOutageKeepsTheLastView) {
  cluster.pods["llm"] = {{"llm-a", "10.1.0.1", true}};
  auto act = make_kubernetes_actuator(config());
  ASSERT_EQ(act->observe().replicas.size(), 1u);
  {
    std::lock_guard lock(cluster.mu);
    cluster.fail_slices = true;
  }
  const auto obs = act->observe();
  ASSERT_EQ(obs.replicas.size(), 1u) << "an API error must not look like dead pods";
  EXPECT_GE(act->stats().errors, 1u);
}

TEST_F(K8sTest, TokenAndNamespaceFilesAreRead) {
  const std::string dir = ::testing::TempDir() + "k8s_sa_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/token") << "tok-1\n";
  std::ofstream(dir + "/namespace") << "ns1\n";
  auto c = config();
  c.token.clear();
  c.ns.clear();
  c.token_file = dir + "/token";
  c.namespace_file = dir + "/namespace";
  auto act = make_kubernetes_actuator(c);
  act->observe();
  std::ofstream(dir + "/token") << "tok-2\n";  // bound tokens rotate: read per call
  act->observe();
  const auto reqs = server.requests();
  ASSERT_GE(reqs.size(), 2u);
  EXPECT_EQ(reqs.front().headers.at("authorization"), "Bearer tok-1");
  EXPECT_EQ(reqs.back().headers.at("authorization"), "Bearer tok-2");
  EXPECT_NE(reqs.front().target.find("/namespaces/ns1/"), std::string::npos);
  std::filesystem::remove_all(dir);
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// HTTPS with CA verification against `openssl s_server -WWW`, which serves files by path:
// the Scale object sits at the API path. (GET only, which is all this checks: the TLS
// client, SNI, CA pinning and hostname/IP verification.)
TEST(K8sTls, VerifiesTheApiServerAgainstTheConfiguredCa) {
  if (::access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl CLI not installed";
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("k8s_tls_" + std::to_string(::getpid()));
  const fs::path www = dir / "www";
  fs::create_directories(www / "apis/apps/v1/namespaces/ns1/deployments/llm");
  std::ofstream(www / "apis/apps/v1/namespaces/ns1/deployments/llm/scale")
      << R"({"apiVersion":"autoscaling/v1","kind":"Scale","spec":{"replicas":3},"status":{"replicas":3}})";
  const std::string gen = "openssl req -x509 -newkey rsa:2048 -nodes -keyout " + (dir / "key.pem").string() + " -out " +
                          (dir / "cert.pem").string() +
                          " -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost -days 1 2>/dev/null";
  ASSERT_EQ(std::system(gen.c_str()), 0);
  const int port = free_port();
  const std::string cmd = "cd " + www.string() + " && exec openssl s_server -accept 127.0.0.1:" + std::to_string(port) +
                          " -cert ../cert.pem -key ../key.pem -WWW -quiet >/dev/null 2>&1";
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = -1;
  ASSERT_EQ(::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  for (int i = 0; i < 100; ++i) {  // until it listens
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  KubernetesActuatorConfig c;
  c.api_server = "https://127.0.0.1:" + std::to_string(port);
  c.ca_file = (dir / "cert.pem").string();
  c.token = "t";
  c.ns = "ns1";
  c.deployment = c.service = "llm";
  c.retries = 0;
  auto good = make_kubernetes_actuator(c);
  const auto obs = good->observe();  // Scale over TLS; s_server has no EndpointSlices
  EXPECT_EQ(obs.pending, 3);

  c.ca_file = "";  // system CAs do not know this self-signed server
  auto bad = make_kubernetes_actuator(c);
  const auto before = bad->stats().errors;
  EXPECT_EQ(bad->observe().pending, 0);
  EXPECT_GT(bad->stats().errors, before);
  EXPECT_NE(bad->stats().last_error.find("certificate verify failed"), std::string::npos) << bad->stats().last_error;

  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  fs::remove_all(dir);
}

// HttpClient.ParsesUrls moved to common/tests/url_test.cc with the parser.

TEST(HttpClient, DeadlineCoversASilentServer) {
  // Listens (the kernel completes the handshake) but never answers.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const auto url = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/metrics";
  const auto r = http::get(url, 0.2);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("timeout"), std::string::npos) << r.error;
  const auto r2 = http::request("GET", "https://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/", {}, {}, 0.2,
                                {"", true});
  EXPECT_NE(r2.error.find("timeout"), std::string::npos) << r2.error << " (TLS handshake never answered)";
  ::close(fd);
}

class RecordingRouting final : public RoutingTarget {
 public:
  std::vector<std::string> activated;
  void activate(const std::string&, const std::string& id, const Endpoint&) override { activated.push_back(id); }
  void drain(const std::string&, const std::string&, std::function<void()> done) override { done(); }
  void remove(const std::string&, const std::string&) override {}
};

TEST_F(K8sTest, ControllerScalesDeploymentsAndRoutesReadyPods) {
  cluster.autoscale_pods = true;
  cluster.replicas["llm"] = 0;
  auto act = make_kubernetes_actuator(config());
  RecordingRouting routing;
  LifecycleConfig lc;
  lc.warm_pool_size = 1;
  PoolController pool("llama", "k8s", lc, *act, routing);
  pool.step(0, 2);
  {
    std::lock_guard lock(cluster.mu);
    EXPECT_EQ(cluster.replicas["llm"], 2);
    EXPECT_EQ(cluster.replicas["llm-warm"], 1);
    for (auto& [svc, pods] : cluster.pods)
      for (auto& p : pods) p.ready = true;
  }
  pool.step(1, 2);
  EXPECT_EQ(pool.counts().active, 2);
  EXPECT_EQ(pool.counts().warm, 1);
  EXPECT_EQ(routing.activated.size(), 2u);
  pool.step(2, 2);
  std::lock_guard lock(cluster.mu);
  EXPECT_EQ(cluster.replicas["llm"], 2) << "no second round";
}

}  // namespace
}  // namespace tidegate::scaler
