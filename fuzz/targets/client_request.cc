// The client side of the gateway's HTTP/1.1 framing: ClientRequestParser
// (gateway/src/client_request.h: Beast's basic_parser<true> with the gateway's callbacks and its
// Transfer-Encoding rule) driven as ClientConnection::read_header / on_header drive it: a request parser
// per request on a keep-alive connection, pipelined requests parsed from the same buffer, reads
// of any size into a buffer of at most max_header_bytes + kFramingSlackBytes.
//
// Checks:
//  - the same bytes cut into reads anywhere (one read, random reads, one byte at a time) give the
//    same requests (method, target, version, keep-alive, fields, body) and the same error (or,
//    for a head the input leaves unfinished, an error with one cut and "partial" with another);
//  - smaller limits (header 256 B, body 128 B, buffer 256 B + 1 KiB) only cut the connection
//    short with a limit error (431/413 in the session); every request before the cut is the same;
//  - on every request the parser accepts: Transfer-Encoding present means the body was read
//    chunked (else the gateway and a proxy in front of it frame the bytes differently: request
//    smuggling); never both Content-Length and Transfer-Encoding; a Content-Length body has that
//    many bytes, which are the bytes after the head; a chunked body equals what a strict
//    chunked decoder written here makes of the same bytes, where that decoder can read them.
#include <boost/beast/http/error.hpp>
#include <optional>
#include <string>
#include <vector>

#include "client_request.h"
#include "fuzz_util.h"

using namespace tidegate::gateway;
namespace http = boost::beast::http;

namespace {

struct Limits {
  std::uint32_t header;
  std::uint64_t body;
  std::size_t buffer;  // Session: buffer_.max_size(max_header_bytes + kFramingSlackBytes)
};
constexpr Limits kDefault{16 * 1024, 8 * 1024 * 1024, 16 * 1024 + 64 * 1024};
constexpr Limits kSmall{256, 128, 256 + 1024};

struct Req {
  std::string method, target;
  int version = 0;
  bool keep_alive = false, chunked = false;
  std::optional<std::uint64_t> content_length;
  std::vector<std::string> fields;  // "name\0value", in order
  std::string body;
  std::size_t wire_begin = 0, wire_end = 0;
  bool operator==(const Req& o) const {
    return method == o.method && target == o.target && version == o.version && keep_alive == o.keep_alive &&
           chunked == o.chunked && content_length == o.content_length && fields == o.fields && body == o.body &&
           wire_begin == o.wire_begin && wire_end == o.wire_end;
  }
};

struct Conn {
  std::vector<Req> requests;
  std::string error;  // "" (connection ended cleanly), "partial", "buffer_overflow" or the parser's error
};

bool is_limit_error(const std::string& e) {
  return e == http::make_error_code(http::error::header_limit).message() ||
         e == http::make_error_code(http::error::body_limit).message() || e == "buffer_overflow";
}

// cut == 0: the whole input is one read; 1: one byte per read; else random reads.
Conn parse_connection(std::string_view input, const Limits& lim, int cut, std::uint64_t seed) {
  Conn out;
  ClientRequest req;  // reused from one request to the next, as the connection does
  std::optional<ClientRequestParser> parser;
  std::string pending;
  std::size_t consumed = 0;
  fuzz::Reads reads(input, cut, seed);
  auto read_more = [&] { return reads.next(pending); };
  for (int k = 0; k < 32; ++k) {
    if (pending.empty() && !read_more()) return out;  // clean end between requests
    parser.emplace(req);
    parser->header_limit(lim.header);
    parser->body_limit(lim.body);
    const std::size_t begin = consumed;
    while (!parser->is_done()) {
      boost::beast::error_code ec;
      const std::size_t window = std::min(pending.size(), lim.buffer);
      const std::size_t used = parser->put(boost::asio::buffer(pending.data(), window), ec);
      pending.erase(0, used);
      consumed += used;
      if (ec && ec != http::error::need_more) {
        out.error = ec.message();
        return out;
      }
      if (parser->is_done()) break;
      if (used == 0 || ec == http::error::need_more) {
        if (pending.size() >= lim.buffer) {  // the buffer is full and the parser wants more
          out.error = "buffer_overflow";
          return out;
        }
        if (!read_more()) {
          out.error = "partial";
          return out;
        }
      }
    }
    Req r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.version = req.version();
    r.keep_alive = req.keep_alive();
    r.chunked = parser->chunked();
    if (const auto cl = parser->content_length()) r.content_length = *cl;
    req.for_each_field([&](const ClientRequest::Field& f) {
      r.fields.push_back(std::string(f.name_string) + '\0' + std::string(f.value));
    });
    r.body = req.body();
    r.wire_begin = begin;
    r.wire_end = consumed;
    (void)req.header(http::field::authorization);
    (void)req.header("x-request-id");
    out.requests.push_back(std::move(r));
    if (!req.keep_alive()) return out;  // the session closes after answering
  }
  return out;
}

// A strict RFC 9112 chunked decoder: hex size, extensions to CRLF, data, CRLF; trailers to an
// empty line. nullopt where it cannot read the bytes (the parser may be more lenient there).
std::optional<std::string> dechunk(std::string_view s, std::size_t& end) {
  std::string body;
  std::size_t i = 0;
  auto line_end = [&](std::size_t from) { return s.find("\r\n", from); };
  for (;;) {
    std::uint64_t size = 0;
    std::size_t digits = 0;
    while (i < s.size() && std::isxdigit(static_cast<unsigned char>(s[i]))) {
      if (++digits > 15) return std::nullopt;
      const char c = s[i++];
      size = size * 16 + static_cast<std::uint64_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    if (digits == 0) return std::nullopt;
    const auto eol = line_end(i);
    if (eol == std::string_view::npos) return std::nullopt;
    const auto ext = s.substr(i, eol - i);
    if (!ext.empty() && ext[0] != ';') return std::nullopt;
    if (ext.find_first_of("\r\n") != std::string_view::npos) return std::nullopt;
    i = eol + 2;
    if (size == 0) break;
    if (s.size() - i < size + 2 || s.substr(i + size, 2) != "\r\n") return std::nullopt;
    body.append(s.substr(i, size));
    i += size + 2;
  }
  for (;;) {  // trailer section
    const auto eol = line_end(i);
    if (eol == std::string_view::npos) return std::nullopt;
    const auto line = s.substr(i, eol - i);
    i = eol + 2;
    if (line.empty()) break;
    if (line.find('\n') != std::string_view::npos || line.find(':') == std::string_view::npos) return std::nullopt;
  }
  end = i;
  return body;
}

void check_request(const Req& r, std::string_view input) {
  const auto wire = input.substr(r.wire_begin, r.wire_end - r.wire_begin);
  bool te = false, cl = false;
  for (const auto& f : r.fields) {
    const auto name = std::string_view(f).substr(0, f.find('\0'));
    te = te || boost::beast::iequals(name, "transfer-encoding");
    cl = cl || boost::beast::iequals(name, "content-length");
  }
  // K1 (fixed): "a=b, chunked" was accepted as chunked while Beast left the body unframed.
  FUZZ_CHECK(!te || r.chunked, "Transfer-Encoding accepted but the body was not read chunked", wire);
  FUZZ_CHECK(!(te && cl), "both Transfer-Encoding and Content-Length accepted", wire);
  FUZZ_CHECK(!r.method.empty() && !r.target.empty() && (r.version == 10 || r.version == 11), "request line", wire);
  const auto head_end = wire.find("\r\n\r\n");
  if (r.content_length) {
    FUZZ_CHECK(r.body.size() == *r.content_length, "body size is not the Content-Length", wire);
    if (head_end != std::string_view::npos && head_end + 4 + r.body.size() == wire.size())
      FUZZ_CHECK(wire.substr(head_end + 4) == r.body, "Content-Length body is not the bytes after the head", wire);
  } else if (!r.chunked) {
    FUZZ_CHECK(r.body.empty(), "a body without Content-Length or chunked framing", wire);
  }
  if (r.chunked && head_end != std::string_view::npos) {
    bool bare_lf = false;
    for (std::size_t i = 0; i < head_end; ++i) bare_lf = bare_lf || (wire[i] == '\n' && (i == 0 || wire[i - 1] != '\r'));
    std::size_t end = 0;
    const auto ref = bare_lf ? std::nullopt : dechunk(wire.substr(head_end + 4), end);
    if (ref) {
      FUZZ_CHECK(*ref == r.body, "chunked body differs from a strict decoder's", wire, r.body);
      FUZZ_CHECK(head_end + 4 + end == wire.size(), "chunked message ends elsewhere than a strict decoder's", wire);
    }
  }
}

void check_same(const Conn& a, const Conn& b, std::string_view input, const char* what) {
  FUZZ_CHECK(a.requests.size() == b.requests.size(), "request count depends on the reads", input, what);
  for (std::size_t i = 0; i < a.requests.size(); ++i)
    FUZZ_CHECK(a.requests[i] == b.requests[i], "a request depends on the reads", input, what);
  // Beast fails fast on a bad start line only on its first look at a head (skip_ == 0); after a
  // need_more it waits for the whole head. So the same bad head can read as "partial" (the
  // client never finished it) with one cut and as its error with another; both refuse it.
  // Likewise a head that is both malformed and at the header limit: which of the two Beast
  // reports depends on how much of it one read held (a 300 s run's find: "bad line ending" in
  // one read, "header limit exceeded" in several). Both refuse the head and close.
  const std::string limit = http::make_error_code(http::error::header_limit).message();
  const bool both_refuse_at_the_limit =
      (a.error == limit && !b.error.empty()) || (b.error == limit && !a.error.empty());
  FUZZ_CHECK(a.error == b.error || a.error == "partial" || b.error == "partial" || both_refuse_at_the_limit,
             "the error depends on the reads", a.error, b.error);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto seed = fuzz::fnv1a(data, size);
  const Conn whole = parse_connection(input, kDefault, 0, seed);
  for (const auto& r : whole.requests) check_request(r, input);
  check_same(whole, parse_connection(input, kDefault, 2, seed), input, "random reads");
  if (size <= 2048) check_same(whole, parse_connection(input, kDefault, 1, seed), input, "one byte per read");

  const Conn small = parse_connection(input, kSmall, 2, seed);
  FUZZ_CHECK(small.requests.size() <= whole.requests.size(), "smaller limits let more requests through", input);
  for (std::size_t i = 0; i < small.requests.size(); ++i)
    FUZZ_CHECK(small.requests[i] == whole.requests[i], "smaller limits changed a request", input);
  if (small.requests.size() < whole.requests.size())
    FUZZ_CHECK(is_limit_error(small.error), "smaller limits cut the connection with an error that is not a limit",
               small.error, whole.error);
  else
    FUZZ_CHECK(small.error == whole.error || is_limit_error(small.error) || small.error == "partial" ||
                   whole.error == "partial",
               "smaller limits ended the connection with another error", small.error, whole.error);
  return 0;
}
