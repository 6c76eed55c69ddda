// UpstreamAttempt on its own, in process, against a scripted upstream on loopback: what it
// reports to its owner for an answer, interim heads, a stream, a body over the cap, a refused
// connect and a silent replica (the tick's deadline), that a pooled connection is reused, and
// that dropping its handle cancels it without a word to the owner.
#include <gtest/gtest.h>

#include <boost/asio.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "impl.h"
#include "upstream_attempt.h"

namespace tidegate::gateway {
namespace {

// Answers each request on a connection with the next scripted reply (verbatim bytes); an empty
// reply means stay silent. Runs on the test's io_context.
class ScriptedUpstream final {
 public:
  ScriptedUpstream(net::io_context& ioc, std::vector<std::string> replies)
      : acceptor_(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)), replies_(std::move(replies)) {
    accept();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int accepted = 0;
  int requests = 0;
  int closed_by_peer = 0;  // connections the gateway side closed
  std::string last_request;

 private:
  struct Conn {
    explicit Conn(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    std::string in;
    std::array<char, 4096> buf{};
  };
  void accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket s) {
      if (ec) return;
      ++accepted;
      read(std::make_shared<Conn>(std::move(s)));
      accept();
    });
  }
  void read(std::shared_ptr<Conn> c) {
    c->socket.async_read_some(net::buffer(c->buf), [this, c](beast::error_code ec, std::size_t n) {
      if (ec) {
        ++closed_by_peer;
        return;
      }
      c->in.append(c->buf.data(), n);
      const auto end = c->in.find("\r\n\r\n");
      if (end == std::string::npos) return read(c);
      const auto cl = c->in.find("Content-Length: ");
      const std::size_t body = cl == std::string::npos ? 0 : std::stoul(c->in.substr(cl + 16));
      if (c->in.size() < end + 4 + body) return read(c);
      last_request = c->in.substr(0, end + 4 + body);
      c->in.erase(0, end + 4 + body);
      const std::string reply = requests < static_cast<int>(replies_.size()) ? replies_[requests] : "";
      ++requests;
      if (reply.empty()) return read(c);  // silent: the gateway's deadline decides
      auto out = std::make_shared<std::string>(reply);
      net::async_write(c->socket, net::buffer(*out), [this, c, out](beast::error_code ec, std::size_t) {
        if (!ec) read(c);
      });
    });
  }
  tcp::acceptor acceptor_;
  std::vector<std::string> replies_;
};

// Records what the attempt told it and drives the attempt on as a request would.
class RecordingOwner final : public AttemptOwner {
 public:
  std::vector<std::string> events;
  std::string body, streamed;
  int status = 0;
  bool stream = false;

  void on_attempt_head(UpstreamAttempt& a) override {
    status = a.parser().status();
    events.push_back("head " + std::to_string(status));
    if (stream) return a.read_stream();
    a.read_body();
  }
  void on_attempt_body(UpstreamAttempt& a) override {
    events.push_back("body");
    body = a.body();
    a.finish();
  }
  void on_attempt_stream(UpstreamAttempt& a, beast::error_code ec) override {
    streamed += a.take_chunk();
    while (!ec && a.parse_buffered(ec)) streamed += a.take_chunk();
    if (ec) {
      events.push_back("stream error");
      return;
    }
    if (a.parser().is_done()) {
      events.push_back("stream done");
      return a.finish();
    }
    a.read_stream();
  }
  void on_attempt_failed(UpstreamAttempt&, Failure f) override { events.push_back(std::string(spec(f).name)); }
};

class UpstreamAttemptTest : public ::testing::Test {
 protected:
  ReplicaPtr replica(std::uint16_t port) {
    auto r = std::make_shared<Replica>();
    r->id = "r0";
    r->host = "127.0.0.1";
    r->port = port;
    r->serial = 7;
    return r;
  }
  AttemptLimits limits(double first_byte_s = 5) {
    return {Clock::now() + std::chrono::seconds(30), 5, first_byte_s, 5, 1 << 20};
  }
  // Starts an attempt (its head is a minimal POST) and keeps it in a handle.
  AttemptHandle start(const ReplicaPtr& r, RecordingOwner& owner, AttemptLimits l, bool fresh = false) {
    auto a = std::make_shared<UpstreamAttempt>(worker_, r, owner, anchor_, l);
    a->head() = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n";
    a->start("{}", fresh);
    return AttemptHandle(a);
  }
  // Runs the loop until `done` or a bound of wall time; false on the bound.
  template <class Done>
  bool run_until(Done done, std::chrono::milliseconds bound = std::chrono::milliseconds(3000)) {
    const auto end = Clock::now() + bound;
    while (!done() && Clock::now() < end) {
      worker_.ioc.restart();
      worker_.ioc.run_for(std::chrono::milliseconds(10));
    }
    return done();
  }

  Worker worker_;
  std::shared_ptr<int> anchor_ = std::make_shared<int>(0);
};

const std::string kOk =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";

TEST_F(UpstreamAttemptTest, AnswersAndItsConnectionIsReused) {
  ScriptedUpstream up(worker_.ioc, {kOk, kOk});
  auto r = replica(up.port());
  RecordingOwner first, second;
  auto a = start(r, first, limits());
  ASSERT_TRUE(run_until([&] { return first.events.size() == 2; }));
  EXPECT_EQ(first.events, (std::vector<std::string>{"head 200", "body"}));
  EXPECT_EQ(first.body, "{\"ok\":true}");
  EXPECT_FALSE(a->reused());
  EXPECT_NE(up.last_request.find("Content-Length: 2\r\n\r\n{}"), std::string::npos);
  a.reset();  // finished: the handle's cancel must not close the pooled connection
  auto b = start(r, second, limits());
  EXPECT_TRUE(b->reused());
  ASSERT_TRUE(run_until([&] { return second.events.size() == 2; }));
  EXPECT_EQ(second.body, "{\"ok\":true}");
  EXPECT_EQ(up.accepted, 1);
  EXPECT_EQ(up.requests, 2);
}

TEST_F(UpstreamAttemptTest, InterimHeadsAreSkipped) {
  ScriptedUpstream up(worker_.ioc, {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + kOk});
  RecordingOwner owner;
  auto a = start(replica(up.port()), owner, limits());
  ASSERT_TRUE(run_until([&] { return owner.events.size() == 2; }));
  EXPECT_EQ(owner.events, (std::vector<std::string>{"head 200", "body"}));
}

TEST_F(UpstreamAttemptTest, AStatusOutsideHttpFailsTheAttempt) {
  ScriptedUpstream up(worker_.ioc, {"HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n"});
  RecordingOwner owner;
  auto a = start(replica(up.port()), owner, limits());
  ASSERT_TRUE(run_until([&] { return !owner.events.empty(); }));
  EXPECT_EQ(owner.events, (std::vector<std::string>{"bad_status"}));
  EXPECT_EQ(a->failure(), Failure::kBadStatus);
}

TEST_F(UpstreamAttemptTest, AStreamIsReadChunkByChunk) {
  const std::string events = "data: {\"a\":1}\n\ndata: [DONE]\n\n";
  char size[16];
  std::snprintf(size, sizeof size, "%zx", events.size());
  ScriptedUpstream up(worker_.ioc, {"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
                                    std::string(size) + "\r\n" + events + "\r\n0\r\n\r\n"});
  RecordingOwner owner;
  owner.stream = true;
  auto a = start(replica(up.port()), owner, limits());
  ASSERT_TRUE(run_until([&] { return owner.events.size() == 2; }));
  EXPECT_EQ(owner.events, (std::vector<std::string>{"head 200", "stream done"}));
  EXPECT_EQ(owner.streamed, events);
}

TEST_F(UpstreamAttemptTest, ABodyOverTheCapFailsBeforeItIsRead) {
  ScriptedUpstream up(worker_.ioc, {"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n"});
  RecordingOwner owner;
  auto a = start(replica(up.port()), owner, limits());
  ASSERT_TRUE(run_until([&] { return owner.events.size() == 2; }));
  EXPECT_EQ(owner.events, (std::vector<std::string>{"head 200", "body_too_large"}));
}

TEST_F(UpstreamAttemptTest, ARefusedConnectIsAConnectFailure) {
  std::uint16_t port;
  {
    tcp::acceptor closed(worker_.ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    port = closed.local_endpoint().port();
  }  // nothing listens there now
  RecordingOwner owner;
  auto a = start(replica(port), owner, limits());
  ASSERT_TRUE(run_until([&] { return !owner.events.empty(); }));
  EXPECT_EQ(owner.events, (std::vector<std::string>{"connect_failed"}));
}

TEST_F(UpstreamAttemptTest, TheTickFiresTheStepsDeadline) {
  ScriptedUpstream up(worker_.ioc, {""});  // reads the request, never answers
  RecordingOwner owner;
  // A first-byte timeout of 5 s that the test's own ticks cross; no real time need pass, so a
  // slow (sanitized) build cannot fire it early.
  auto a = start(replica(up.port()), owner, limits(5));
  ASSERT_TRUE(run_until([&] { return up.requests == 1; }));
  a->on_tick(coarse_now() + std::chrono::seconds(4));  // before the deadline: nothing happens
  ASSERT_FALSE(run_until([&] { return !owner.events.empty(); }, std::chrono::milliseconds(100)));
  a->on_tick(coarse_now() + std::chrono::seconds(6));
  ASSERT_TRUE(run_until([&] { return !owner.events.empty(); }));
  EXPECT_EQ(owner.events, (std::vector<std::string>{"first_byte_timeout"}));
}

TEST_F(UpstreamAttemptTest, DroppingTheHandleCancelsWithoutAWord) {
  ScriptedUpstream up(worker_.ioc, {""});
  RecordingOwner owner;
  auto a = start(replica(up.port()), owner, limits());
  ASSERT_TRUE(run_until([&] { return up.requests == 1; }));
  a.reset();  // the request let go: the socket closes, the pending read completes unseen
  ASSERT_TRUE(run_until([&] { return up.closed_by_peer == 1; }));
  run_until([] { return false; }, std::chrono::milliseconds(50));
  EXPECT_TRUE(owner.events.empty());
  EXPECT_EQ(worker_.conns.take(7), nullptr);  // a cancelled attempt pools nothing
}

}  // namespace
}  // namespace tidegate::gateway
