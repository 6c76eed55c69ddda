// The only translation unit of the blocking client that includes Beast and OpenSSL (slow to
// compile). Each connection owns an io_context that only the thread holding the connection
// runs, so a blocking call is a few async operations run to completion, with tcp_stream's
// expiry as the deadline of each step.
#include "tidegate/common/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/ssl.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

namespace tidegate::common {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = HttpClient::Clock;
using Request = http::request<http::string_body>;

struct Connection {
  explicit Connection(ssl::context* tls) {
    if (tls) secure.emplace(ioc, *tls);
    else plain.emplace(ioc);
  }
  beast::tcp_stream& socket() { return secure ? beast::get_lowest_layer(*secure) : *plain; }

  asio::io_context ioc;  // declared first: the streams below are bound to it
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::flat_buffer buffer;  // bytes read past one reply belong to the next
};

// A step that failed; `stale` when a reused connection turned out closed before the reply
// began, which is worth one retry on a fresh connection.
struct Failure {
  std::string what;
  bool stale = false;
};

void run(asio::io_context& ioc) {
  ioc.restart();
  ioc.run();
}

// One step's time: from when it begins to the earlier of the call's deadline and its timeout.
struct Step {
  Clock::time_point began, until;
};

Step step(Clock::time_point deadline, std::chrono::milliseconds timeout) {
  const auto now = Clock::now();
  if (timeout == std::chrono::milliseconds::max() || timeout >= deadline - now) return {now, deadline};
  return {now, now + timeout};
}

void expire(beast::tcp_stream& s, Clock::time_point until) {
  if (until == Clock::time_point::max()) s.expires_never();
  else s.expires_at(until);
}

std::string timed_out(const char* what, const Step& s) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(s.until - s.began).count();
  return std::string("timed out during ") + what + " (timeout " + std::to_string(ms) + " ms)";
}

std::optional<Failure> connect(Connection& c, const HttpUrl& url, const Step& s) {
  beast::error_code ec;
  // Synchronous: numeric hosts and /etc/hosts names answer at once; a DNS name can block up to
  // the resolver's own timeout (these calls are never made on an event loop).
  tcp::resolver resolver(c.ioc);
  const auto endpoints = resolver.resolve(url.host, std::to_string(url.port), ec);
  if (ec) return Failure{"cannot resolve '" + url.host + "': " + ec.message()};
  expire(c.socket(), s.until);
  c.socket().async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
  run(c.ioc);
  if (ec == beast::error::timeout) return Failure{timed_out("connect", s)};
  if (ec) return Failure{"connect failed: " + ec.message()};
  if (!c.secure) return std::nullopt;
  if (!SSL_set_tlsext_host_name(c.secure->native_handle(), url.host.c_str())) return Failure{"TLS: cannot set SNI"};
  c.secure->set_verify_callback(ssl::host_name_verification(url.host));
  c.secure->async_handshake(ssl::stream_base::client, [&](beast::error_code e) { ec = e; });
  run(c.ioc);
  if (ec == beast::error::timeout) return Failure{timed_out("TLS handshake", s)};
  if (ec) return Failure{"TLS handshake failed: " + ec.message()};
  return std::nullopt;
}

template <class Stream>
std::optional<Failure> exchange(Connection& c, Stream& stream, Request& req, const Step& s, std::size_t max_body,
                                http::response<http::string_body>& res) {
  beast::error_code ec;
  expire(c.socket(), s.until);
  http::async_write(stream, req, [&](beast::error_code e, std::size_t) { ec = e; });
  run(c.ioc);
  if (ec == beast::error::timeout) return Failure{timed_out("send", s)};
  if (ec) return Failure{"send failed: " + ec.message(), true};
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_body);
  http::async_read(stream, c.buffer, parser, [&](beast::error_code e, std::size_t) { ec = e; });
  run(c.ioc);
  if (ec == beast::error::timeout) return Failure{timed_out("receive", s)};
  if (ec) return Failure{"receive failed: " + ec.message(), !parser.got_some()};
  res = parser.release();
  return std::nullopt;
}

}  // namespace

struct HttpClient::Impl {
  HttpClientOptions options;
  std::mutex mu;
  std::optional<ssl::context> tls;  // made at the first https call
  std::string tls_error;
  std::map<std::string, std::vector<std::unique_ptr<Connection>>> idle;  // by origin

  ssl::context* tls_context(std::string& error) {
    std::lock_guard lock(mu);
    if (!tls && tls_error.empty()) {
      tls.emplace(ssl::context::tls_client);
      boost::system::error_code ec;
      if (options.tls.insecure_skip_verify) {
        tls->set_verify_mode(ssl::verify_none, ec);
      } else {
        tls->set_verify_mode(ssl::verify_peer, ec);
        if (options.tls.ca_file.empty()) tls->set_default_verify_paths(ec);
        else tls->load_verify_file(options.tls.ca_file, ec);
        if (ec) {
          tls_error = "TLS: cannot load CA '" + options.tls.ca_file + "': " + ec.message();
          tls.reset();
        }
      }
    }
    error = tls_error;
    return tls ? &*tls : nullptr;
  }

  std::unique_ptr<Connection> take_idle(const std::string& origin) {
    std::lock_guard lock(mu);
    auto it = idle.find(origin);
    if (it == idle.end() || it->second.empty()) return nullptr;
    auto c = std::move(it->second.back());
    it->second.pop_back();
    return c;
  }

  void give_back(const std::string& origin, std::unique_ptr<Connection> c) {
    std::lock_guard lock(mu);
    auto& list = idle[origin];
    if (list.size() < options.max_idle_per_origin) list.push_back(std::move(c));
  }
};

HttpClient::HttpClient(HttpClientOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

HttpClient::~HttpClient() = default;

HttpResponse HttpClient::request(std::string_view method, std::string_view url, const Headers& headers,
                                 std::string body, Clock::time_point deadline) {
  try {
    return request(method, parse_http_url(url, impl_->options.schemes), headers, std::move(body), deadline);
  } catch (const std::invalid_argument& e) {
    HttpResponse r;
    r.error = std::string("bad url: ") + e.what();
    return r;
  }
}

HttpResponse HttpClient::request(std::string_view method, const HttpUrl& url, const Headers& headers,
                                 std::string body, Clock::time_point deadline) {
  const auto& o = impl_->options;
  HttpResponse result;
  ssl::context* tls = nullptr;
  if (url.tls && !(tls = impl_->tls_context(result.error))) return result;

  Request req;
  const auto verb = http::string_to_verb(method);
  if (verb == http::verb::unknown) req.method_string(method);
  else req.method(verb);
  req.target(url.target());
  req.version(11);
  req.set(http::field::host, url.authority());
  req.set(http::field::user_agent, o.user_agent);
  for (const auto& [name, value] : headers) req.set(name, value);
  if (!body.empty() || verb == http::verb::post || verb == http::verb::put || verb == http::verb::patch) {
    req.body() = std::move(body);
    req.prepare_payload();
  }
  req.keep_alive(o.max_idle_per_origin > 0);

  const auto origin = url.origin();
  auto conn = impl_->take_idle(origin);
  for (;;) {
    if (Clock::now() >= deadline) {
      result.error = "deadline passed before sending";
      return result;
    }
    const bool reused = conn != nullptr;
    if (!reused) {
      conn = std::make_unique<Connection>(tls);
      if (auto f = connect(*conn, url, step(deadline, o.connect_timeout))) {
        result.error = std::move(f->what);
        return result;
      }
    }
    http::response<http::string_body> res;
    const auto s = step(deadline, o.read_timeout);
    auto f = conn->secure ? exchange(*conn, *conn->secure, req, s, o.max_body_bytes, res)
                          : exchange(*conn, *conn->plain, req, s, o.max_body_bytes, res);
    if (f) {
      conn.reset();
      if (reused && f->stale) continue;  // the server had closed it while idle: once more, fresh
      result.error = std::move(f->what);
      return result;
    }
    result.status = static_cast<int>(res.result_int());
    result.content_type = std::string(res[http::field::content_type]);
    if (res.keep_alive() && req.keep_alive()) impl_->give_back(origin, std::move(conn));
    result.body = std::move(res.body());
    return result;
  }
}

}  // namespace tidegate::common
