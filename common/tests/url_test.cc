// The shared URL parser: what each caller relied on before it moved here (the scaler's
// https and IPv6 literals, the gateway's port checks, the embedder's refusals).
#include <gtest/gtest.h>

#include <stdexcept>

#include "tidegate/common/url.h"

namespace tidegate::common {
namespace {

std::string error_of(std::string_view text, UrlSchemes schemes = UrlSchemes::kHttp) {
  try {
    parse_http_url(text, schemes);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

// Moved from scaler/tests/kubernetes_test.cc (HttpClient.ParsesUrls).
TEST(Url, ParsesHttpsAndIpv6Literals) {
  auto u = parse_http_url("https://[::1]:6443/apis?x=1", UrlSchemes::kHttpOrHttps);
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 6443);
  EXPECT_EQ(u.target(), "/apis?x=1");
  EXPECT_EQ(u.authority(), "[::1]:6443");
  EXPECT_EQ(u.origin(), "https://[::1]:6443");
  u = parse_http_url("http://example");
  EXPECT_EQ(u.port, 80);
  EXPECT_FALSE(u.port_written);
  EXPECT_EQ(u.target(), "/");
  EXPECT_EQ(u.authority(), "example");
  EXPECT_THROW(parse_http_url("ftp://x/", UrlSchemes::kHttpOrHttps), std::invalid_argument);
  EXPECT_THROW(parse_http_url("http:///x", UrlSchemes::kHttpOrHttps), std::invalid_argument);
}

TEST(Url, SplitsHostPortPathAndQuery) {
  const auto u = parse_http_url("http://127.0.0.1:8000/v1/embeddings?api-version=2#frag");
  EXPECT_FALSE(u.tls);
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 8000);
  EXPECT_TRUE(u.port_written);
  EXPECT_EQ(u.path, "/v1/embeddings");
  EXPECT_EQ(u.query, "api-version=2");
  EXPECT_EQ(u.target(), "/v1/embeddings?api-version=2");  // the fragment is never sent
  EXPECT_EQ(parse_http_url("https://h", UrlSchemes::kHttpOrHttps).port, 443);
  EXPECT_EQ(parse_http_url("http://h:/x").port, 80);  // an empty port is the default (RFC 3986)
  EXPECT_FALSE(parse_http_url("http://h:/x").port_written);
  EXPECT_EQ(parse_http_url("HTTP://h:1").port, 1);   // schemes are case-insensitive
}

TEST(Url, ErrorsSayWhatIsWrong) {
  EXPECT_EQ(error_of("localhost:8000"), "only http:// URLs are supported, got \"localhost:8000\"");
  EXPECT_EQ(error_of("https://api.openai.com/v1"), "only http:// URLs are supported, got \"https://api.openai.com/v1\"");
  EXPECT_EQ(error_of("ftp://x/", UrlSchemes::kHttpOrHttps),
            "only http:// and https:// URLs are supported, got \"ftp://x/\"");
  EXPECT_EQ(error_of("http:///v1"), "URL has no host: \"http:///v1\"");
  EXPECT_EQ(error_of("http://h:abc"), "port must be a number, got \"abc\"");
  EXPECT_EQ(error_of("http://h:80x/v1"), "port must be a number, got \"80x\"");
  EXPECT_EQ(error_of("http://h:70000"), "port out of range: 70000");
  EXPECT_EQ(error_of("http://h:0"), "port must not be 0");
  EXPECT_EQ(error_of("http://user:pw@h:1/"), "URL must not carry user info (put credentials in a header): \"http://user:pw@h:1/\"");
  EXPECT_NE(error_of("http://a b").find("\"http://a b\" is not a valid URL"), std::string::npos) << error_of("http://a b");
  EXPECT_NE(error_of("http://[::1").find("is not a valid URL"), std::string::npos);
}

}  // namespace
}  // namespace tidegate::common
