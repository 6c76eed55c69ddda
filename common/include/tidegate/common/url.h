#pragma once
// The one URL parser (Boost.URL underneath): replica URLs in the gateway's config, the scaler's
// probes and Kubernetes API, the budget webhook and the embedding endpoint all go through it,
// so "http://[::1]:8000", a missing port or a stray query mean the same thing everywhere.
#include <cstdint>
#include <string>
#include <string_view>

namespace tidegate::common {

enum class UrlSchemes { kHttp, kHttpOrHttps };

struct HttpUrl {
  bool tls = false;          // https
  std::string host;          // an IPv6 literal without its brackets
  std::uint16_t port = 0;    // as written, else the scheme's default (80, 443)
  bool port_written = false;  // "http://h:8000" yes, "http://h" and "http://h:" no
  std::string path;          // percent-encoded as written; may be empty
  std::string query;         // without the '?'
  bool has_query = false;

  std::string target() const;     // what the request line carries: path (or "/") and query
  std::string authority() const;  // host[:port] for a Host header (brackets back on IPv6)
  std::string origin() const;     // scheme://host:port, the key for reusing a connection
};

// Parses an absolute http:// URL (or https:// when `schemes` allows). Throws
// std::invalid_argument saying what is wrong and quoting the text (callers add where it came
// from: a config key and line, an embedder's name). A fragment is dropped (never sent);
// user info is refused (credentials go in headers).
HttpUrl parse_http_url(std::string_view text, UrlSchemes schemes = UrlSchemes::kHttp);

}  // namespace tidegate::common
