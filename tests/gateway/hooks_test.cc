// The seams the lead wires the cache, cost accounting and admin pages into: RequestFilter
// (async pre-forward local replies, response headers, on_complete) and add_route, driven
// through a real in-process Gateway in front of a real tidegate-sim.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "tidegate/gateway/gateway.h"

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using namespace tidegate::gateway;

namespace {

// tidegate-sim on an OS-chosen port; the first stdout line names it.
struct SimProcess {
  pid_t pid = -1;
  int port = 0;
  SimProcess() {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      execl(TIDEGATE_SIM_BIN, TIDEGATE_SIM_BIN, "--port", "0", "--ttft-ms", "5", "--tpot-ms", "2", "--echo", nullptr);
      _exit(127);
    }
    close(fds[1]);
    FILE* f = fdopen(fds[0], "r");
    char line[256] = {};
    if (fgets(line, sizeof line, f)) {
      std::string s(line);
      port = std::stoi(s.substr(s.rfind(':') + 1));
    }
    fclose(f);
  }
  ~SimProcess() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

struct Reply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
};

Reply request(int port, http::verb verb, const std::string& target, const std::string& body = "",
              const std::string& auth = "") {
  net::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  if (!auth.empty()) req.set(http::field::authorization, "Bearer " + auth);
  req.body() = body;
  req.prepare_payload();
  http::write(s, req);
  boost::beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(s, buf, res);
  Reply r{static_cast<int>(res.result_int()), res.body(), {}};
  for (const auto& f : res) r.headers[std::string(f.name_string())] = std::string(f.value());
  return r;
}

std::string chat_body(const std::string& content, bool stream = false, bool usage = false) {
  boost::json::object o{{"model", "sim"}, {"max_tokens", 6}, {"stream", stream},
                        {"messages", boost::json::array{boost::json::object{{"role", "user"}, {"content", content}}}}};
  if (usage) o["stream_options"] = boost::json::object{{"include_usage", true}};
  return boost::json::serialize(o);
}

// Answers "cached?" prompts locally from another thread, like a cache lookup would.
// The test filter's per-request state: set when an attempt starts, read when it ends.
struct AttemptMark {
  bool started = false;
};

class TestFilter final : public RequestFilter {
 public:
  void pre_forward(const std::shared_ptr<RequestContext>& ctx, Done done) override {
    const auto& msgs = ctx->body->as_object().at("messages").as_array();
    const std::string prompt(msgs.back().as_object().at("content").as_string());
    if (prompt != "cached?") return done(std::nullopt);
    std::thread([ctx, done] {
      LocalReply r;
      r.body = R"({"choices":[{"index":0,"message":{"role":"assistant","content":"from cache"},"finish_reason":"stop"}]})";
      r.headers.emplace_back("x-tidegate-cache", "hit");
      r.reason = "cache_hit";
      done(r);
    }).detach();
  }
  bool reads_request_headers() const override { return true; }
  void on_response_headers(RequestContext& ctx) override { ctx.response_headers.emplace_back("x-tidegate-cost-usd", "0.000123"); }
  void on_attempt_start(RequestContext& ctx) override {
    ctx.filter_state.get<AttemptMark>().started = true;
    attempts_started++;
  }
  void on_attempt_end(RequestContext& ctx, bool success) override {
    if (const auto* mark = ctx.filter_state.find<AttemptMark>(); success && mark && mark->started) attempts_ok++;
  }
  void on_stream_event(RequestContext& ctx, boost::json::object* usage) override {
    if (!usage) return void(stream_events++);
    usage_seen_tokens = ctx.completion_tokens;
    (*usage)["tidegate_cost_usd"] = 0.5;
  }
  std::atomic<int> attempts_started{0}, attempts_ok{0}, stream_events{0};
  std::atomic<std::int64_t> usage_seen_tokens{-1};
  void on_complete(const RequestContext& ctx) override {
    std::lock_guard lock(mu);
    completed.push_back(ctx);
    cv.notify_all();
  }
  RequestContext wait_for(std::size_t n) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return completed.size() >= n; });
    EXPECT_GE(completed.size(), n);
    return completed.size() >= n ? completed[n - 1] : RequestContext{};
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<RequestContext> completed;
};

std::shared_ptr<const GatewayConfig> config_for(int sim_port) {
  return parse_gateway_config_text(
      "listen: \"127.0.0.1:0\"\nthreads: 2\naccess_log: {path: /dev/null}\nadmin_key: \"admin-secret-1\"\n"
      "api_keys:\n  - {name: k1, key: \"sk-hooks-0001\", tenant: acme, tags: {team: search, project: qa}}\n"
      "models:\n  - name: sim\n    health: {interval: 0}\n    replicas:\n      - {id: s0, url: \"http://127.0.0.1:" +
      std::to_string(sim_port) + "\", class: a100}\n");
}

}  // namespace

TEST(GatewayHooks, FilterAndRoutes) {
  SimProcess sim;
  ASSERT_GT(sim.port, 0) << "tidegate-sim did not start";
  Gateway gw(config_for(sim.port));
  auto filter = std::make_shared<TestFilter>();
  gw.add_filter(filter);
  gw.add_route("GET", "/admin/echo", [](const RouteRequest& rr, std::function<void(LocalReply)> respond) {
    LocalReply r;
    r.body = boost::json::serialize(boost::json::object{{"path", rr.path}, {"query", rr.query}});
    std::thread([r, respond] { respond(r); }).detach();  // answering from another thread is fine
  });
  gw.start();
  const int port = gw.port();

  // Forwarded: on_complete sees tenant, tags, tokens, content, replica, timings.
  auto r = request(port, http::verb::post, "/v1/chat/completions", chat_body("hello hooks"), "sk-hooks-0001");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["x-tidegate-cost-usd"], "0.000123");
  auto ctx = filter->wait_for(1);
  EXPECT_EQ(ctx.model, "sim");
  EXPECT_EQ(ctx.tenant, "acme");
  EXPECT_EQ(ctx.key_name, "k1");
  EXPECT_EQ(ctx.tags["project"], "qa");
  EXPECT_EQ(ctx.status, 200);
  EXPECT_EQ(ctx.replica_id, "s0");
  EXPECT_EQ(ctx.replica_class, "a100");
  EXPECT_GT(ctx.prompt_tokens, 0);
  EXPECT_GT(ctx.completion_tokens, 0);
  EXPECT_EQ(ctx.content.rfind("hello hooks", 0), 0u) << ctx.content;
  EXPECT_FALSE(ctx.finish_reason.empty());
  EXPECT_TRUE(ctx.complete);
  EXPECT_FALSE(ctx.local_reply);
  EXPECT_GT(ctx.timings.total_s, 0);
  EXPECT_GE(ctx.timings.total_s, ctx.timings.upstream_s);

  // Streamed: content and usage accumulated across chunks.
  r = request(port, http::verb::post, "/v1/chat/completions", chat_body("stream hooks", true), "sk-hooks-0001");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body.find("\"usage\""), std::string::npos);  // not asked for: stripped
  ctx = filter->wait_for(2);
  EXPECT_TRUE(ctx.stream);
  EXPECT_EQ(ctx.content.rfind("stream hooks", 0), 0u) << ctx.content;
  EXPECT_GT(ctx.completion_tokens, 0);
  EXPECT_TRUE(ctx.complete);
  EXPECT_GT(filter->stream_events.load(), 2);
  EXPECT_EQ(filter->usage_seen_tokens.load(), ctx.completion_tokens);
  EXPECT_EQ(filter->attempts_started.load(), 2);
  EXPECT_EQ(filter->attempts_ok.load(), 2);
  EXPECT_EQ(ctx.request_headers.count("authorization"), 0u);  // never handed to filters
  EXPECT_EQ(ctx.request_headers["content-type"], "application/json");

  // A client that asked for usage sees what the filter added to the usage chunk.
  r = request(port, http::verb::post, "/v1/chat/completions", chat_body("usage please", true, true), "sk-hooks-0001");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"tidegate_cost_usd\":0.5"), std::string::npos) << r.body;
  filter->wait_for(3);

  // Answered by the filter from another thread; the replica is never asked.
  r = request(port, http::verb::post, "/v1/chat/completions", chat_body("cached?"), "sk-hooks-0001");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("from cache"), std::string::npos);
  EXPECT_EQ(r.headers["x-tidegate-cache"], "hit");
  ctx = filter->wait_for(4);
  EXPECT_TRUE(ctx.local_reply);
  EXPECT_EQ(ctx.reason, "cache_hit");
  EXPECT_TRUE(ctx.replica_id.empty());

  // Extra admin routes: admin key required.
  EXPECT_EQ(request(port, http::verb::get, "/admin/echo?x=1").status, 401);
  EXPECT_EQ(request(port, http::verb::get, "/admin/echo?x=1", "", "sk-hooks-0001").status, 401);
  r = request(port, http::verb::get, "/admin/echo/more?x=1", "", "admin-secret-1");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"path":"/admin/echo/more","query":"x=1"})");

  // The scaler's view: signals and live-set changes while traffic flows.
  auto s = gw.signals().sample("sim");
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_TRUE(s.replica_healthy.count("s0"));
  gw.routing().activate("sim", "s1", {"127.0.0.1", static_cast<std::uint16_t>(sim.port)});
  bool drained = false;
  gw.routing().drain("sim", "s0", [&] { drained = true; });
  EXPECT_TRUE(drained);  // nothing in flight
  r = request(port, http::verb::post, "/v1/chat/completions", chat_body("after drain"), "sk-hooks-0001");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(filter->wait_for(5).replica_id, "s1");
  gw.routing().remove("sim", "s0");
  EXPECT_EQ(gw.signals().sample("sim").replica_healthy.count("s0"), 0u);
  gw.stop();
}

namespace {

// Says it does not run before forwarding; its pre_forward would answer every request itself.
class WatchOnlyFilter final : public RequestFilter {
 public:
  void pre_forward(const std::shared_ptr<RequestContext>&, Done done) override {
    ++pre_forward_calls;
    LocalReply r;
    r.status = 418;
    done(r);
  }
  bool runs_before_forward() const override { return false; }
  bool reads_request_body() const override { return false; }
  void on_complete(const RequestContext& ctx) override {
    std::lock_guard lock(mu);
    statuses.push_back(ctx.status);
  }
  std::atomic<int> pre_forward_calls{0};
  std::mutex mu;
  std::vector<int> statuses;
};

}  // namespace

TEST(GatewayHooks, WatchOnlyFilterIsNotAskedBeforeForwarding) {
  SimProcess sim;
  ASSERT_GT(sim.port, 0) << "tidegate-sim did not start";
  Gateway gw(config_for(sim.port));
  auto watcher = std::make_shared<WatchOnlyFilter>();
  auto answering = std::make_shared<TestFilter>();  // runs after it, as a filter that does run
  gw.add_filter(watcher);
  gw.add_filter(answering);
  gw.start();
  auto r = request(gw.port(), http::verb::post, "/v1/chat/completions", chat_body("watched"), "sk-hooks-0001");
  EXPECT_EQ(r.status, 200) << r.body;
  r = request(gw.port(), http::verb::post, "/v1/chat/completions", chat_body("cached?"), "sk-hooks-0001");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("from cache"), std::string::npos);  // the later filter still answers
  answering->wait_for(2);
  gw.stop();
  EXPECT_EQ(watcher->pre_forward_calls.load(), 0);
  std::lock_guard lock(watcher->mu);
  EXPECT_EQ(watcher->statuses, (std::vector<int>{200, 200}));  // it still sees every completion
}

namespace {

// Throws from the hooks its prompt names: "throw pre_forward", "throw late" (every hook after
// forwarding), anything else passes.
class ThrowingFilter final : public RequestFilter {
 public:
  void pre_forward(const std::shared_ptr<RequestContext>& ctx, Done done) override {
    if (prompt(*ctx) == "throw pre_forward") throw std::runtime_error("pre_forward bug");
    done(std::nullopt);
  }
  void on_attempt_start(RequestContext& ctx) override { late(ctx); }
  void on_attempt_end(RequestContext& ctx, bool) override { late(ctx); }
  void on_response_headers(RequestContext& ctx) override { late(ctx); }
  void on_stream_event(RequestContext& ctx, boost::json::object*) override { late(ctx); }
  void on_complete(const RequestContext& ctx) override {
    completions++;
    late(ctx);
  }
  std::atomic<int> completions{0};

 private:
  static std::string prompt(const RequestContext& ctx) {
    if (!ctx.body) return {};
    const auto& msgs = ctx.body->as_object().at("messages").as_array();
    return std::string(msgs.back().as_object().at("content").as_string());
  }
  static void late(const RequestContext& ctx) {
    if (prompt(ctx) == "throw late") throw 42;  // not even a std::exception
  }
};

}  // namespace

TEST(GatewayHooks, AFilterThatThrowsCostsItsRequestNotTheWorker) {
  SimProcess sim;
  ASSERT_GT(sim.port, 0) << "tidegate-sim did not start";
  Gateway gw(config_for(sim.port));
  auto thrower = std::make_shared<ThrowingFilter>();
  gw.add_filter(thrower);
  gw.start();
  // Threw before answering: a counted 500 in OpenAI's shape.
  auto r = request(gw.port(), http::verb::post, "/v1/chat/completions", chat_body("throw pre_forward"), "sk-hooks-0001");
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_NE(r.body.find("\"code\":\"filter_failed\""), std::string::npos) << r.body;
  // Threw in every later hook: the answer still comes, whole and streamed.
  r = request(gw.port(), http::verb::post, "/v1/chat/completions", chat_body("throw late"), "sk-hooks-0001");
  EXPECT_EQ(r.status, 200) << r.body;
  r = request(gw.port(), http::verb::post, "/v1/chat/completions", chat_body("throw late", true), "sk-hooks-0001");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("[DONE]"), std::string::npos) << r.body;
  // And the workers are all still there: a run of plain requests is served.
  for (int i = 0; i < 6; ++i) {
    r = request(gw.port(), http::verb::post, "/v1/chat/completions", chat_body("fine"), "sk-hooks-0001");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  const auto metrics = request(gw.port(), http::verb::get, "/metrics", "", "admin-secret-1").body;
  EXPECT_NE(metrics.find("tidegate_local_replies_total{reason=\"filter_failed\"} 1"), std::string::npos);
  for (const char* hook : {"pre_forward", "on_attempt_start", "on_attempt_end", "on_response_headers", "on_stream_event",
                           "on_complete"})
    EXPECT_NE(metrics.find(std::string("tidegate_filter_errors_total{hook=\"") + hook + "\"}"), std::string::npos) << hook;
  gw.stop();
  EXPECT_EQ(thrower->completions.load(), 9);  // every inference request, the 500 included
}

namespace {

// Keeps every `done` it is given and answers nothing until told: a cache lookup still running
// on its own thread when the gateway shuts down.
class LateFilter final : public RequestFilter {
 public:
  void pre_forward(const std::shared_ptr<RequestContext>&, Done done) override {
    std::lock_guard lock(mu);
    kept.push_back(std::move(done));
    cv.notify_all();
  }
  bool wait_for_one() {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return !kept.empty(); });
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Done> kept;
};

// Sends a request and reads nothing back: the connection stays open while the filter waits.
tcp::socket send_only(net::io_context& ioc, int port, const std::string& target, const std::string& body) {
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.set(http::field::authorization, "Bearer sk-hooks-0001");
  req.body() = body;
  req.prepare_payload();
  http::write(s, req);
  return s;
}

}  // namespace

// An answer that comes from another thread after the gateway is gone finds nothing to touch:
// the worker held the waiting connection, the callback only a way back that is now shut (the
// connection's last reference used to go with the callback, onto that thread, after its loop
// and worker were destroyed: a use after free TSan caught). Run under ASan and TSan by make.
TEST(GatewayHooks, AFilterOrRouteAnsweringAfterTheGatewayIsGoneTouchesNothing) {
  SimProcess sim;
  ASSERT_GT(sim.port, 0) << "tidegate-sim did not start";
  auto late = std::make_shared<LateFilter>();
  std::mutex route_mu;
  std::vector<std::function<void(LocalReply)>> route_answers;
  net::io_context client;
  std::vector<tcp::socket> waiting;
  {
    Gateway gw(config_for(sim.port));
    gw.add_filter(late);
    gw.add_route("POST", "/late", [&](const RouteRequest&, std::function<void(LocalReply)> done) {
      std::lock_guard lock(route_mu);
      route_answers.push_back(std::move(done));
    }, RouteAccess::kOpen);
    gw.start();
    waiting.push_back(send_only(client, gw.port(), "/v1/chat/completions", chat_body("anything")));
    waiting.push_back(send_only(client, gw.port(), "/late", "{}"));
    ASSERT_TRUE(late->wait_for_one());
    for (int i = 0; i < 200; ++i) {  // the route is called on its worker's loop
      if (std::lock_guard lock(route_mu); !route_answers.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    {
      std::lock_guard lock(route_mu);
      ASSERT_EQ(route_answers.size(), 1u) << "the route was not called";
    }
    gw.stop();
  }
  // Answered, then dropped, on a thread of their own.
  std::thread([&] {
    for (auto& done : late->kept) done(std::nullopt);
    late->kept.clear();
    for (auto& done : route_answers) done(LocalReply{});
    route_answers.clear();
  }).join();
  // The gateway closed both connections when it went.
  for (auto& s : waiting) {
    char byte;
    boost::system::error_code ec;
    s.read_some(net::buffer(&byte, 1), ec);
    EXPECT_TRUE(ec) << "the connection is still open";
  }
  std::lock_guard lock(route_mu);
  EXPECT_TRUE(route_answers.empty());
}
