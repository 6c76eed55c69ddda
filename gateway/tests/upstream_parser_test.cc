// The fieldless upstream parser against the framings a replica may use, fed in odd pieces
// into a small body buffer, as the proxy feeds it.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "upstream_parser.h"

using namespace tidegate::gateway;
namespace http = boost::beast::http;

namespace {

struct Parsed {
  int status = 0;
  std::string content_type;
  std::string body;
  bool keep_alive = false;
  bool done = false;
  boost::beast::error_code ec;
};

// Feeds `wire` `piece` bytes at a time, the body through a 7-byte buffer as a stream reads it,
// or with `collect` appended whole to a string as a non-stream answer is.
Parsed feed(const std::string& wire, std::size_t piece, bool collect = false) {
  UpstreamResponseParser p;
  p.body_limit(boost::none);
  Parsed out;
  if (collect) p.collect_into(&out.body);
  std::array<char, 7> chunk{};
  std::string pending;
  std::size_t fed = 0;
  while (!p.is_done()) {
    if (fed < wire.size()) {
      const auto n = std::min(piece, wire.size() - fed);
      pending.append(wire, fed, n);
      fed += n;
    } else if (pending.empty()) {
      break;
    }
    for (;;) {
      p.body().data = chunk.data();
      p.body().size = chunk.size();
      boost::beast::error_code ec;
      const auto used = p.put(boost::asio::buffer(pending), ec);
      pending.erase(0, used);
      if (!collect) out.body.append(chunk.data(), chunk.size() - p.body().size);
      if (ec == http::error::need_buffer) continue;  // the body buffer was full: drain and go on
      if (ec == http::error::need_more) break;
      if (ec) {
        out.ec = ec;
        return out;
      }
      if (p.is_done() || used == 0) break;
    }
  }
  out.status = p.status();
  out.content_type = std::string(p.content_type());
  out.keep_alive = p.keep_alive();
  out.done = p.is_done();
  return out;
}

void expect_parsed(const Parsed& r, int status, const std::string& content_type, const std::string& body, bool keep_alive) {
  EXPECT_FALSE(r.ec) << r.ec.message();
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.status, status);
  EXPECT_EQ(r.content_type, content_type);
  EXPECT_EQ(r.body, body);
  EXPECT_EQ(r.keep_alive, keep_alive);
}

}  // namespace

TEST(UpstreamResponseParser, LengthDelimitedBody) {
  const std::string body = R"({"choices":[{"message":{"content":"hello there"}}],"usage":{"prompt_tokens":3}})";
  const std::string wire = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Other: 1\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body;
  for (std::size_t piece : {1u, 3u, 16u, 4096u}) {
    SCOPED_TRACE(piece);
    for (bool collect : {false, true}) expect_parsed(feed(wire, piece, collect), 200, "application/json", body, true);
  }
}

TEST(UpstreamResponseParser, ChunkedBodyAndConnectionClose) {
  const std::string wire =
      "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nConnection: close\r\n"
      "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0c\r\n, replica 2!\r\n0\r\n\r\n";
  for (std::size_t piece : {1u, 5u, 4096u}) {
    SCOPED_TRACE(piece);
    for (bool collect : {false, true}) expect_parsed(feed(wire, piece, collect), 503, "text/plain", "hello, replica 2!", false);
  }
}

TEST(UpstreamResponseParser, FirstContentTypeWinsAndBadFramingFails) {
  const auto r = feed("HTTP/1.1 200 OK\r\nContent-Type: a/b\r\nContent-Type: c/d\r\nContent-Length: 0\r\n\r\n", 4096);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.content_type, "a/b");
  EXPECT_TRUE(r.body.empty());
  const auto bad = feed("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 4096);
  EXPECT_TRUE(bad.ec);
}
