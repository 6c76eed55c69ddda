// The replica side: UpstreamResponseParser (gateway/src/upstream_parser.h: Beast's
// basic_parser<false> keeping only status, content type and framing), driven as
// upstream_attempt.cc / request_stream.cc drive it: interim 1xx heads skipped (at most kMaxInterimHeads, a new
// parser each), then either the whole body collected into a string (collect_into) or, for a
// 200 text/event-stream, the body streamed through a fixed buffer (need_buffer when it is full)
// into the SSE parser. End of input is the replica closing the connection (put_eof).
//
// Checks:
//  - the same bytes cut into reads anywhere give the same heads, status, content type,
//    keep-alive, body and error, and the same SSE events;
//  - streaming through the 16 KiB relay buffer and through a 7-byte buffer gives the same body
//    as collecting it whole;
//  - a Content-Length body has exactly that many bytes, except after a 204 or 304 head, which
//    never has a body.
#include <boost/beast/http/error.hpp>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "sse.h"
#include "upstream_parser.h"

using namespace tidegate::gateway;
namespace http = boost::beast::http;

namespace {

constexpr int kMaxInterimHeads = 8;  // gateway/src/upstream_attempt.h

struct Answer {
  std::vector<int> statuses;  // every head read, interim ones first
  std::string content_type, body, error;
  bool keep_alive = false, done = false, chunked = false;
  std::optional<std::uint64_t> content_length;
  std::vector<std::string> events;
  bool operator==(const Answer&) const = default;
};

enum class BodyMode { kCollect, kStream, kTinyBuffer };

Answer read_answer(std::string_view input, int cut, BodyMode mode, std::uint64_t seed) {
  Answer out;
  std::string pending;
  bool eof = false;
  fuzz::Reads reads(input, cut, seed);
  auto read_more = [&] { return reads.next(pending); };
  // Puts until the parser is done or wants more; false (with out.error) on a parser error.
  std::optional<UpstreamResponseParser> p;
  std::array<char, 16384> chunk{};
  const std::size_t chunk_size = mode == BodyMode::kTinyBuffer ? 7 : chunk.size();
  SseParser sse;
  bool streaming = false;  // the body phase has begun with a buffer set
  auto relay = [&] {
    const auto got = chunk_size - p->body().size;
    out.body.append(chunk.data(), got);
    if (got) {
      sse.feed(std::string_view(chunk.data(), got));
      SseEvent ev;
      while (sse.next(ev)) out.events.emplace_back(ev.raw);
    }
    p->body().data = chunk.data();
    p->body().size = chunk_size;
  };
  auto pump = [&](bool head_only) {
    for (;;) {
      if (p->is_done() || (head_only && p->is_header_done())) return true;
      boost::beast::error_code ec;
      std::size_t used = 0;
      if (pending.empty() && eof) {
        if (!p->got_some()) {  // what Beast's read does at EOF before any byte of a message
          out.error = "end_of_stream";
          return false;
        }
        p->put_eof(ec);
      } else {
        used = p->put(boost::asio::buffer(pending), ec);
        pending.erase(0, used);
      }
      if (streaming) relay();
      if (ec == http::error::need_buffer) continue;
      if (ec && ec != http::error::need_more) {
        out.error = ec.message();
        return false;
      }
      if (p->is_done() || (head_only && p->is_header_done())) return true;
      if (used == 0 || ec == http::error::need_more || pending.empty()) {
        if (!read_more()) {
          if (eof) {
            out.error = "partial";
            return false;
          }
          eof = true;
        }
      }
    }
  };

  for (int heads = 0;; ++heads) {
    p.emplace();
    p->body_limit(boost::none);
    if (!pump(true)) return out;
    const int status = p->status();
    out.statuses.push_back(status);
    if (status >= 100 && status < 200 && status != 101 && heads < kMaxInterimHeads) {
      FUZZ_CHECK(p->is_done(), "an interim head has a body");
      continue;
    }
    break;
  }
  const int status = out.statuses.back();
  if (status < 200 || status > 599) {  // bad_status: the proxy stops reading here
    out.error = "bad_status";
    return out;
  }
  out.content_type = std::string(p->content_type());
  if (mode == BodyMode::kCollect) {
    p->collect_into(&out.body);
  } else {
    p->body().data = chunk.data();
    p->body().size = chunk_size;
    streaming = true;
  }
  if (!pump(false)) return out;
  out.done = true;
  out.keep_alive = p->keep_alive();
  out.chunked = p->chunked();
  if (const auto cl = p->content_length()) out.content_length = *cl;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto seed = fuzz::fnv1a(data, size);
  const Answer whole = read_answer(input, 0, BodyMode::kStream, seed);
  auto same = [&](const Answer& other, const char* what) {
    FUZZ_CHECK(whole.statuses == other.statuses, "statuses depend on the reads", input, what);
    // A bad start line fails fast on Beast's first look at a head only (see client_request.cc):
    // with another cut the same head is still unfinished when the replica closes.
    const auto incomplete = [](const std::string& e) {
      return e == "partial" || e == http::make_error_code(http::error::partial_message).message();
    };
    FUZZ_CHECK(whole.error == other.error || incomplete(whole.error) || incomplete(other.error),
               "the error depends on the reads or the body mode", whole.error, other.error);
    if (whole.error != other.error) return;
    FUZZ_CHECK(whole.body == other.body, "the body depends on the reads or the body mode", input, what);
    FUZZ_CHECK(whole.content_type == other.content_type && whole.keep_alive == other.keep_alive &&
                   whole.done == other.done && whole.chunked == other.chunked &&
                   whole.content_length == other.content_length,
               "framing depends on the reads or the body mode", input, what);
  };
  const Answer random = read_answer(input, 2, BodyMode::kStream, seed);
  same(random, "random reads, streamed");
  if (whole.error == random.error) FUZZ_CHECK(whole.events == random.events, "SSE events depend on the reads", input);
  same(read_answer(input, 2, BodyMode::kTinyBuffer, seed), "random reads, 7-byte buffer");
  same(read_answer(input, 0, BodyMode::kCollect, seed), "one read, collected");
  if (size <= 2048) same(read_answer(input, 1, BodyMode::kCollect, seed), "one byte per read, collected");

  if (whole.done) {
    const int status = whole.statuses.back();
    const bool bodiless = status == 204 || status == 304 || status < 200;  // whatever Content-Length says
    if (whole.content_length && !bodiless)
      FUZZ_CHECK(whole.body.size() == *whole.content_length, "body is not Content-Length bytes", input);
    if (status == 204 || status == 304) FUZZ_CHECK(whole.body.empty(), "a 204/304 answer with a body", input);
  }
  return 0;
}
