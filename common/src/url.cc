// The only translation unit that compiles Boost.URL: Boost 1.81 ships it header-only, with the
// definitions in src.hpp to be included once per program (there is no libboost_url to link).
#include "tidegate/common/url.h"

#include <boost/url/src.hpp>

#include <boost/url/parse.hpp>
#include <cctype>
#include <stdexcept>

namespace tidegate::common {
namespace {

std::string quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

[[noreturn]] void bad(const std::string& why) { throw std::invalid_argument(why); }

// The scheme as written before "://", lower-cased ("" when there is none).
std::string scheme_of(std::string_view text) {
  const auto end = text.find("://");
  if (end == std::string_view::npos) return {};
  std::string scheme(text.substr(0, end));
  for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return scheme;
}

}  // namespace

std::string HttpUrl::target() const {
  std::string t = path.empty() ? std::string("/") : path;
  if (has_query) t += "?" + query;
  return t;
}

std::string HttpUrl::authority() const {
  std::string a = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != (tls ? 443 : 80)) a += ":" + std::to_string(port);
  return a;
}

std::string HttpUrl::origin() const {
  const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return (tls ? "https://" : "http://") + h + ":" + std::to_string(port);
}

HttpUrl parse_http_url(std::string_view text, UrlSchemes schemes) {
  // The scheme first, by hand: "localhost:8000" is a valid URI (scheme "localhost") and
  // Boost.URL would accept it, but what its writer missed is "http://".
  const auto scheme = scheme_of(text);
  const bool https_ok = schemes == UrlSchemes::kHttpOrHttps;
  if (scheme != "http" && !(https_ok && scheme == "https")) {
    bad(std::string(https_ok ? "only http:// and https:// URLs are supported" : "only http:// URLs are supported") +
        ", got " + quoted(text));
  }
  const auto parsed = boost::urls::parse_uri(text);
  if (!parsed) bad(quoted(text) + " is not a valid URL (" + parsed.error().message() + ")");
  const auto& u = *parsed;
  HttpUrl out;
  out.tls = scheme == "https";
  out.host = std::string(u.host_address());
  if (out.host.empty()) bad("URL has no host: " + quoted(text));
  if (u.has_userinfo()) bad("URL must not carry user info (put credentials in a header): " + quoted(text));
  std::string path(u.encoded_path());
  // Boost 1.81 reads "http://h:abc" as host "h", an empty port and the path "abc"; a path after
  // an authority always starts with '/', so anything else is a port that is not a number.
  if (!path.empty() && path.front() != '/') {
    if (u.has_port()) bad("port must be a number, got " + quoted(std::string(u.port()) + path.substr(0, path.find('/'))));
    bad(quoted(text) + " is not a valid URL");
  }
  out.port = out.tls ? 443 : 80;
  if (u.has_port() && !u.port().empty()) {
    if (u.port_number() == 0) {
      if (u.port().find_first_not_of('0') == std::string_view::npos) bad("port must not be 0");
      bad("port out of range: " + std::string(u.port()));
    }
    out.port = u.port_number();
    out.port_written = true;
  }
  out.path = std::move(path);
  out.has_query = u.has_query();
  out.query = std::string(u.encoded_query());
  return out;
}

}  // namespace tidegate::common
