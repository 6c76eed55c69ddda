#include "client_request.h"

#include <gtest/gtest.h>

#include <boost/beast/http/error.hpp>
#include <optional>
#include <string>

namespace tidegate::gateway {
namespace {

namespace http = boost::beast::http;

// Feeds `wire` in pieces of `step` bytes, as reads would bring it.
boost::beast::error_code parse(std::optional<ClientRequestParser>& parser, ClientRequest& req, const std::string& wire,
                               std::size_t step = 1 << 20, std::uint64_t body_limit = 1 << 20) {
  parser.emplace(req);
  parser->body_limit(body_limit);
  boost::beast::error_code ec;
  std::string pending;
  for (std::size_t at = 0; at < wire.size() && !parser->is_done(); at += step) {
    pending += wire.substr(at, step);
    while (!pending.empty() && !parser->is_done()) {  // put() stops after the head
      const auto used = parser->put(boost::asio::buffer(pending), ec);
      pending.erase(0, used);
      if (ec == http::error::need_more) {
        ec = {};
        break;
      }
      if (ec) return ec;
      if (used == 0) break;
    }
  }
  if (!parser->is_done()) return http::error::need_more;
  return ec;
}

TEST(ClientRequest, RequestLineFieldsAndBody) {
  std::optional<ClientRequestParser> parser;
  ClientRequest req;
  const std::string wire =
      "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer sk-1\r\n"
      "X-Request-Id: abc\r\nX-Custom: one\r\nX-Custom: two\r\nContent-Length: 11\r\n\r\n{\"a\":\"b c\"}";
  for (std::size_t step : {std::size_t{1}, std::size_t{7}, wire.size()}) {
    ASSERT_FALSE(parse(parser, req, wire, step)) << "step " << step;
    EXPECT_EQ(req.method(), http::verb::post);
    EXPECT_EQ(req.method_string(), "POST");
    EXPECT_EQ(req.target(), "/v1/chat/completions?x=1");
    EXPECT_EQ(req.version(), 11);
    EXPECT_TRUE(req.keep_alive());
    EXPECT_EQ(req.body(), "{\"a\":\"b c\"}");
    EXPECT_EQ(req.header(http::field::authorization), "Bearer sk-1");
    EXPECT_EQ(req.header("x-request-id"), "abc");  // names compare case-insensitively
    EXPECT_EQ(req.header("X-CUSTOM"), "one");        // the first of repeated fields
    EXPECT_EQ(req.header(http::field::expect), "");
    int fields = 0;
    req.for_each_field([&](const ClientRequest::Field& f) {
      ++fields;
      if (f.name_string == "X-Request-Id") {
        EXPECT_EQ(f.name, http::field::unknown);
      }
      if (f.name_string == "Host") {
        EXPECT_EQ(f.name, http::field::host);
      }
    });
    EXPECT_EQ(fields, 6);
  }
}

TEST(ClientRequest, ChunkedBodyAndConnectionSemantics) {
  std::optional<ClientRequestParser> parser;
  ClientRequest req;
  ASSERT_FALSE(parse(parser, req,
                     "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                     "4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n",
                     5));
  EXPECT_EQ(req.body(), "{\"a\":1}");
  EXPECT_FALSE(req.keep_alive());
  ASSERT_FALSE(parse(parser, req, "GET /healthz HTTP/1.0\r\n\r\n"));
  EXPECT_FALSE(req.keep_alive());  // HTTP/1.0 without keep-alive
  EXPECT_EQ(req.version(), 10);
  ASSERT_FALSE(parse(parser, req, "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  EXPECT_TRUE(req.keep_alive());
}

TEST(ClientRequest, NextRequestStartsClean) {
  std::optional<ClientRequestParser> parser;
  ClientRequest req;
  ASSERT_FALSE(parse(parser, req, "POST /a HTTP/1.1\r\nX-Only-First: 1\r\nContent-Length: 3\r\n\r\nabc"));
  ASSERT_FALSE(parse(parser, req, "GET /b HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(req.method(), http::verb::get);
  EXPECT_EQ(req.target(), "/b");
  EXPECT_EQ(req.header("x-only-first"), "");
  EXPECT_EQ(req.body(), "");
}

TEST(ClientRequest, LargeBodyIsNotKeptByTheConnection) {
  std::optional<ClientRequestParser> parser;
  ClientRequest req;
  const std::string big(200 * 1024, 'x');
  ASSERT_FALSE(parse(parser, req, "POST /a HTTP/1.1\r\nContent-Length: " + std::to_string(big.size()) + "\r\n\r\n" + big));
  EXPECT_EQ(req.body().size(), big.size());
  ASSERT_FALSE(parse(parser, req, "POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"));
  EXPECT_EQ(req.body(), "{}");
  EXPECT_LE(req.body().capacity(), 64u * 1024);
}

TEST(ClientRequest, LimitsAndBadInputAreParserErrors) {
  std::optional<ClientRequestParser> parser;
  ClientRequest req;
  EXPECT_EQ(parse(parser, req, "POST /a HTTP/1.1\r\nContent-Length: 100\r\n\r\n", 1 << 20, 10), http::error::body_limit);
  EXPECT_TRUE(parse(parser, req, "POST /a HTTP/1.1\r\nBad Header\r\n\r\n"));
  EXPECT_TRUE(parse(parser, req, "POST /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"));
}

}  // namespace
}  // namespace tidegate::gateway
