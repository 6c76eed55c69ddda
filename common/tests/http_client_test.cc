// The shared blocking client against the shared fake server: reuse, a stale connection,
// deadlines per step, and errors that name the step.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <functional>

#include "tidegate/common/http_client.h"
#include "tidegate/testing/fake_http_server.h"

namespace tidegate::common {
namespace {

using namespace std::chrono_literals;
using Clock = HttpClient::Clock;
using tidegate::testing::FakeHttpServer;
using tidegate::testing::FakeRequest;
using tidegate::testing::FakeResponse;

HttpClientOptions with(std::function<void(HttpClientOptions&)> set) {
  HttpClientOptions o;
  set(o);
  return o;
}

FakeResponse hang() {
  FakeResponse r;
  r.hang = true;
  return r;
}

TEST(HttpClient, KeepsAConnectionAliveAcrossRequests) {
  FakeHttpServer server([](const FakeRequest& r) { return FakeResponse{200, "you sent " + r.body, "text/plain"}; });
  HttpClient client;
  for (int i = 0; i < 3; ++i) {
    const auto r = client.request("POST", server.url() + "/echo?x=1", {{"X-Test", "yes"}}, "n" + std::to_string(i));
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "you sent n" + std::to_string(i));
    EXPECT_EQ(r.content_type, "text/plain");
  }
  EXPECT_EQ(server.connections(), 1);
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].target, "/echo?x=1");
  EXPECT_EQ(seen[0].headers.at("x-test"), "yes");
  EXPECT_EQ(seen[0].headers.at("host"), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(seen[0].headers.at("user-agent"), "tidegate");
}

TEST(HttpClient, OneConnectionPerRequestWithoutIdleConnections) {
  FakeHttpServer server([](const FakeRequest&) { return FakeResponse{204, ""}; });
  HttpClient client(with([](auto& o) { o.max_idle_per_origin = 0; }));
  for (int i = 0; i < 2; ++i) EXPECT_EQ(client.request("GET", server.url()).status, 204);
  EXPECT_EQ(server.connections(), 2);
}

TEST(HttpClient, RetriesAConnectionTheServerClosedWhileIdle) {
  FakeHttpServer server([](const FakeRequest&) {
    FakeResponse r{200, "{}"};
    r.close_after = true;
    return r;
  });
  HttpClient client;
  for (int i = 0; i < 3; ++i) {
    const auto r = client.request("GET", server.url() + "/metrics");
    ASSERT_TRUE(r.ok()) << i << ": " << r.error;
    EXPECT_EQ(r.status, 200);
  }
  EXPECT_EQ(server.connections(), 3);
  EXPECT_EQ(server.requests().size(), 3u);  // a retried request was never seen twice
}

TEST(HttpClient, DeadlinesNameTheStep) {
  FakeHttpServer server([](const FakeRequest&) { return hang(); });
  HttpClient client(with([](auto& o) { o.read_timeout = 200ms; }));
  const auto start = Clock::now();
  auto r = client.request("GET", server.url());
  EXPECT_EQ(r.error, "timed out during receive (timeout 200 ms)");
  EXPECT_LT(Clock::now() - start, 3s);
  r = client.request("GET", server.url(), {}, {}, Clock::now() + 100ms);  // the call's deadline comes first
  EXPECT_NE(r.error.find("timed out during receive"), std::string::npos) << r.error;
  r = client.request("GET", server.url(), {}, {}, Clock::now() - 1ms);
  EXPECT_EQ(r.error, "deadline passed before sending");
}

TEST(HttpClient, TransportErrorsComeBackAsText) {
  std::uint16_t port;
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::acceptor a(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  HttpClient client;
  auto r = client.request("GET", "http://127.0.0.1:" + std::to_string(port) + "/");
  EXPECT_EQ(r.error.rfind("connect failed: ", 0), 0u) << r.error;
  r = client.request("GET", "ftp://x/");
  EXPECT_EQ(r.error, "bad url: only http:// and https:// URLs are supported, got \"ftp://x/\"");
  HttpClient bad_ca(with([](auto& o) { o.tls.ca_file = "/nonexistent/ca.pem"; }));
  r = bad_ca.request("GET", "https://127.0.0.1:1/");
  EXPECT_EQ(r.error.rfind("TLS: cannot load CA '/nonexistent/ca.pem'", 0), 0u) << r.error;
}

}  // namespace
}  // namespace tidegate::common
