// The only translation unit of the scaler that includes Beast (builds are slow).
#include "http_client.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/ssl.h>

#include <chrono>
#include <stdexcept>

#include "tidegate/common/url.h"

namespace tidegate::scaler::http {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {

using Request = bhttp::request<bhttp::string_body>;
using Response = bhttp::response<bhttp::string_body>;

template <class Stream>
asio::awaitable<void> exchange(Stream& stream, Request& req, Response& res) {
  co_await bhttp::async_write(stream, req, asio::use_awaitable);
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  co_await bhttp::async_read(stream, buffer, parser, asio::use_awaitable);
  res = parser.release();
}

asio::awaitable<void> run(const common::HttpUrl& url, Request& req, Response& res, asio::ssl::context* ssl, tcp::socket*& raw) {
  auto executor = co_await asio::this_coro::executor;
  tcp::resolver resolver(executor);
  const auto endpoints = co_await resolver.async_resolve(url.host, std::to_string(url.port), asio::use_awaitable);
  if (!ssl) {
    tcp::socket socket(executor);
    raw = &socket;
    co_await asio::async_connect(socket, endpoints, asio::use_awaitable);
    co_await exchange(socket, req, res);
    raw = nullptr;
    co_return;
  }
  beast::ssl_stream<tcp::socket> stream(executor, *ssl);
  raw = &beast::get_lowest_layer(stream);
  if (!SSL_set_tlsext_host_name(stream.native_handle(), url.host.c_str())) throw std::runtime_error("SNI failed");
  stream.set_verify_callback(asio::ssl::host_name_verification(url.host));
  co_await asio::async_connect(beast::get_lowest_layer(stream), endpoints, asio::use_awaitable);
  co_await stream.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
  co_await exchange(stream, req, res);
  raw = nullptr;
}

}  // namespace

Result request(const std::string& method, const std::string& url_text,
               const std::vector<std::pair<std::string, std::string>>& headers, const std::string& body,
               double timeout_s, const TlsOptions& tls) {
  Result result;
  std::optional<common::HttpUrl> url;
  try {
    url = common::parse_http_url(url_text, common::UrlSchemes::kHttpOrHttps);
  } catch (const std::invalid_argument& e) {
    result.error = std::string("bad url: ") + e.what();
    return result;
  }
  std::optional<asio::ssl::context> ssl;
  if (url->tls) {
    ssl.emplace(asio::ssl::context::tls_client);
    boost::system::error_code ec;
    if (tls.insecure_skip_verify) {
      ssl->set_verify_mode(asio::ssl::verify_none, ec);
    } else {
      ssl->set_verify_mode(asio::ssl::verify_peer, ec);
      if (tls.ca_file.empty()) ssl->set_default_verify_paths(ec);
      else ssl->load_verify_file(tls.ca_file, ec);
      if (ec) {
        result.error = "tls: cannot load CA '" + tls.ca_file + "': " + ec.message();
        return result;
      }
    }
  }

  Request req{bhttp::string_to_verb(method), url->target(), 11};
  req.set(bhttp::field::host, url->host);
  req.set(bhttp::field::user_agent, "tidegate-scaler");
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || method == "PATCH" || method == "POST" || method == "PUT") {
    req.body() = body;
    req.prepare_payload();
  }

  asio::io_context ioc;
  Response res;
  tcp::socket* raw = nullptr;
  std::exception_ptr failure;
  bool done = false;
  asio::co_spawn(ioc, run(*url, req, res, ssl ? &*ssl : nullptr, raw), [&](std::exception_ptr e) {
    failure = e;
    done = true;
  });
  ioc.run_for(std::chrono::milliseconds(static_cast<long>(timeout_s * 1000)));
  if (!done) {
    // Deadline: cancel whatever is pending and let the coroutine unwind.
    if (raw) {
      boost::system::error_code ignored;
      raw->close(ignored);
    }
    ioc.stop();
    ioc.restart();
    ioc.run_for(std::chrono::milliseconds(200));
    result.error = "timeout after " + std::to_string(static_cast<int>(timeout_s * 1000)) + "ms";
    return result;
  }
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      result.error = e.what();
    }
    return result;
  }
  result.status = static_cast<int>(res.result_int());
  result.body = std::move(res.body());
  result.content_type = std::string(res[bhttp::field::content_type]);
  return result;
}

}  // namespace tidegate::scaler::http
