// Replica addresses: an IP literal needs no lookup; a name is looked up off the calling thread,
// once, kept, and looked up again after forget() (a connect to it failed).
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <map>

#include "replica_address.h"
#include "replica_pool.h"

namespace tidegate::gateway {
namespace {

TEST(ReplicaAddress, AnIpLiteralIsKnownAtOnce) {
  boost::asio::io_context ioc;
  ResolvedAddress cache;
  bool called = false;
  resolve_address("127.0.0.1", 8080, cache, ioc.get_executor(), [&](boost::system::error_code ec, Endpoints e) {
    called = true;
    ASSERT_FALSE(ec);
    ASSERT_EQ(e->size(), 1u);
    EXPECT_EQ(e->front().port(), 8080);
  });
  EXPECT_TRUE(called) << "inline: no trip through the loop";
  ASSERT_TRUE(cache.get());
}

TEST(ReplicaAddress, ANameIsLookedUpOffTheLoopOnceAndAgainAfterForget) {
  boost::asio::io_context ioc;
  ResolvedAddress cache;
  int calls = 0;
  auto check = [&](boost::system::error_code ec, Endpoints e) {
    ++calls;
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_FALSE(e->empty());
    for (const auto& ep : *e) {
      EXPECT_TRUE(ep.address().is_loopback()) << ep.address().to_string();
      EXPECT_EQ(ep.port(), 9000);
    }
  };
  resolve_address("localhost", 9000, cache, ioc.get_executor(), check);
  EXPECT_EQ(calls, 0) << "a name's lookup completes on the executor, not inline";
  ioc.run();
  ASSERT_EQ(calls, 1);
  ASSERT_TRUE(cache.get());
  resolve_address("localhost", 9000, cache, ioc.get_executor(), check);
  EXPECT_EQ(calls, 2) << "known: inline";
  cache.forget();
  resolve_address("localhost", 9000, cache, ioc.get_executor(), check);
  EXPECT_EQ(calls, 2);
  ioc.restart();
  ioc.run();
  EXPECT_EQ(calls, 3);
}

TEST(ReplicaAddress, AFailedLookupIsAnErrorAndNotKept) {
  boost::asio::io_context ioc;
  ResolvedAddress cache;
  bool failed = false;
  // RFC 6761: .invalid never resolves (answered at once here; without DNS, after its timeout).
  resolve_address("nosuchhost.invalid", 9000, cache, ioc.get_executor(), [&](boost::system::error_code ec, Endpoints e) {
    failed = static_cast<bool>(ec);
    EXPECT_FALSE(e);
  });
  ioc.run();
  EXPECT_TRUE(failed);
  EXPECT_FALSE(cache.get());
}

// A pool tells the gateway of every replica once, when it is added, so its address is looked up
// then and the first request finds it known: the ones already there at once, a new one on add(),
// and none for an add() that only updates a known replica.
TEST(ReplicaAddress, APoolReportsEachNewReplicaOnceForItsLookup) {
  boost::asio::io_context ioc;
  ModelConfig mc;
  mc.name = "m";
  mc.replicas.push_back({.id = "a", .host = "127.0.0.1", .port = 9001});
  ReplicaPool pool(mc, 1);
  std::vector<std::string> told;
  pool.on_new_replica([&](const ReplicaPtr& r) {
    told.push_back(r->id);
    resolve_address(r->host, r->port, r->address, ioc.get_executor(), [](boost::system::error_code, Endpoints) {});
  });
  EXPECT_EQ(told, std::vector<std::string>{"a"});
  pool.add({.id = "b", .host = "127.0.0.1", .port = 9002}, false);
  pool.add({.id = "b", .host = "127.0.0.1", .port = 9002}, false);  // known: updated in place
  EXPECT_EQ(told, (std::vector<std::string>{"a", "b"}));
  pool.add({.id = "b", .host = "127.0.0.1", .port = 9003}, false);  // a new address is a new replica
  EXPECT_EQ(told, (std::vector<std::string>{"a", "b", "b"}));
  for (const auto& r : pool.replicas()) {
    ASSERT_TRUE(r->address.get()) << r->id;
    EXPECT_EQ(r->address.get()->front().port(), r->port);
  }
}

// The Host every request carries: an IPv6 literal in brackets (RFC 7230 section 5.4), or a
// replica reached as [::1]:8000 gets a Host that no server parses.
TEST(ReplicaAddress, AnIpv6LiteralIsBracketedInTheHostHeader) {
  ModelConfig mc;
  mc.name = "m";
  mc.replicas.push_back({.id = "v4", .host = "127.0.0.1", .port = 9001});
  mc.replicas.push_back({.id = "v6", .host = "::1", .port = 9002});
  mc.replicas.push_back({.id = "name", .host = "engine-0.local", .port = 9003});
  ReplicaPool pool(mc, 1);
  std::map<std::string, std::string> host;
  for (const auto& r : pool.replicas()) host[r->id] = r->authority;
  EXPECT_EQ(host["v4"], "127.0.0.1:9001");
  EXPECT_EQ(host["v6"], "[::1]:9002");
  EXPECT_EQ(host["name"], "engine-0.local:9003");
}

}  // namespace
}  // namespace tidegate::gateway
