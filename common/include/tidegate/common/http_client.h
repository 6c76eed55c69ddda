#pragma once
// The one blocking HTTP/1.1 client, for calls made off the event loop: the scaler's probes,
// scrapes and Kubernetes API calls, budget webhooks, embedding endpoints. Idle connections are
// kept per origin and reused (a reused one that turns out closed is retried once, on a fresh
// connection, before any byte of the reply); every step has a deadline; failures come back as
// text naming the step, never as exceptions. Safe to share between threads.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tidegate/common/url.h"

namespace tidegate::common {

struct TlsOptions {
  std::string ca_file;                // PEM bundle; empty = the system's default paths
  bool insecure_skip_verify = false;  // tests and labs only
};

struct HttpClientOptions {
  std::string user_agent = "tidegate";
  // Resolve + connect (+ TLS handshake), then send + receive the whole reply. Each is also
  // capped by the call's deadline; max() leaves only the deadline.
  std::chrono::milliseconds connect_timeout = std::chrono::milliseconds::max();
  std::chrono::milliseconds read_timeout = std::chrono::milliseconds::max();
  std::size_t max_body_bytes = 64 << 20;
  std::size_t max_idle_per_origin = 4;  // 0: one connection per request
  UrlSchemes schemes = UrlSchemes::kHttpOrHttps;
  TlsOptions tls;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string content_type;
  std::string error;  // transport failure (url, resolve, connect, TLS, timeout); empty when a reply came
  bool ok() const { return error.empty(); }
};

class HttpClient final {
 public:
  using Clock = std::chrono::steady_clock;
  using Headers = std::vector<std::pair<std::string, std::string>>;

  explicit HttpClient(HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // A body is sent (with Content-Length) when non-empty or the method is POST, PUT or PATCH.
  HttpResponse request(std::string_view method, std::string_view url, const Headers& headers = {},
                       std::string body = {}, Clock::time_point deadline = Clock::time_point::max());
  HttpResponse request(std::string_view method, const HttpUrl& url, const Headers& headers = {},
                       std::string body = {}, Clock::time_point deadline = Clock::time_point::max());

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // Beast and OpenSSL stay out of this header
};

}  // namespace tidegate::common
