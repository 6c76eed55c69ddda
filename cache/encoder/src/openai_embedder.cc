// The only Beast translation unit of the encoder library.
#include "tidegate/cache/openai_embedder.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <stdexcept>

#include "minilm_internal.h"
#include "tidegate/common/url.h"

namespace tidegate::cache {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxResponseBytes = 64 << 20;

struct Endpoint {
  std::string host, port, target, url;
};

// The shared parser, plus what this endpoint adds: "/embeddings" after an OpenAI base URL.
Endpoint parse_url(const std::string& url) {
  common::HttpUrl u;
  try {
    u = common::parse_http_url(url);
  } catch (const std::invalid_argument& e) {
    const bool tls = url.rfind("https://", 0) == 0;
    throw std::invalid_argument("openai embedder: " + std::string(e.what()) +
                                (tls ? "; for https put a TLS proxy in front" : ""));
  }
  std::string path = u.path;
  while (!path.empty() && path.back() == '/') path.pop_back();
  constexpr std::string_view suffix = "/embeddings";
  if (path.size() < suffix.size() || path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) {
    path += suffix;
  }
  u.path = path;
  Endpoint e;
  e.host = u.host;
  e.port = std::to_string(u.port);
  e.target = u.target();
  e.url = "http://" + u.authority() + e.target;
  return e;
}

class OpenAIEmbedder final : public Embedder {
 public:
  explicit OpenAIEmbedder(const OpenAIEmbedderOptions& o) : o_(o), endpoint_(parse_url(o.url)) {}

  std::size_t dim() const override { return o_.dim; }
  std::string name() const override { return "openai"; }

  std::vector<float> embed(const std::vector<std::string>& texts, Clock::time_point deadline) override {
    std::vector<float> out;
    out.reserve(texts.size() * o_.dim);
    for (std::size_t start = 0; start < texts.size(); start += o_.max_batch) {
      const std::size_t n = std::min(o_.max_batch, texts.size() - start);
      const auto until = std::min(deadline, Clock::now() + o_.timeout);
      const std::string body = post(request_body(texts, start, n), until);
      parse_into(body, n, out);
    }
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("openai embedder " + endpoint_.url + ": " + why);
  }

  std::string request_body(const std::vector<std::string>& texts, std::size_t start, std::size_t n) const {
    boost::json::array input;
    for (std::size_t i = start; i < start + n; ++i) {
      // Several servers reject an empty input string; a space embeds the same "nothing".
      input.emplace_back(texts[i].empty() ? std::string_view(" ") : std::string_view(texts[i]));
    }
    boost::json::object req{{"model", o_.model}, {"input", std::move(input)}, {"encoding_format", "float"}};
    if (o_.request_dimensions) req["dimensions"] = *o_.request_dimensions;
    return boost::json::serialize(req);
  }

  std::string post(std::string body, Clock::time_point until) const {
    if (Clock::now() >= until) fail("deadline exceeded before sending");
    asio::io_context ioc;
    beast::tcp_stream stream(ioc);
    beast::error_code ec;
    // Synchronous resolve: numeric hosts and /etc/hosts names answer at once; a DNS name could
    // block up to the resolver's own timeout (documented limitation).
    tcp::resolver resolver(ioc);
    const auto results = resolver.resolve(endpoint_.host, endpoint_.port, ec);
    if (ec) fail("cannot resolve '" + endpoint_.host + "': " + ec.message());

    http::request<http::string_body> req{http::verb::post, endpoint_.target, 11};
    req.set(http::field::host, endpoint_.host);
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, "application/json");
    req.set(http::field::user_agent, "tidegate");
    if (!o_.api_key.empty()) req.set(http::field::authorization, "Bearer " + o_.api_key);
    req.body() = std::move(body);
    req.prepare_payload();

    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxResponseBytes);
    const char* stage = "connect";
    stream.expires_at(until);
    stream.async_connect(results, [&](beast::error_code e, const tcp::endpoint&) {
      if ((ec = e)) return;
      stage = "send";
      http::async_write(stream, req, [&](beast::error_code e2, std::size_t) {
        if ((ec = e2)) return;
        stage = "receive";
        http::async_read(stream, buffer, parser, [&](beast::error_code e3, std::size_t) { ec = e3; });
      });
    });
    ioc.run();
    if (ec == beast::error::timeout) fail(std::string("timed out during ") + stage);
    if (ec) fail(std::string(stage) + " failed: " + ec.message());
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    auto res = parser.release();
    if (res.result_int() < 200 || res.result_int() >= 300) {
      fail("HTTP " + std::to_string(res.result_int()) + ": " + res.body().substr(0, 300));
    }
    return std::move(res.body());
  }

  void parse_into(const std::string& body, std::size_t n, std::vector<float>& out) const {
    boost::json::error_code ec;
    const auto doc = boost::json::parse(body, ec);
    const auto* data = (!ec && doc.is_object()) ? doc.as_object().if_contains("data") : nullptr;
    if (data == nullptr || !data->is_array()) fail("reply is not JSON with a \"data\" array");
    const auto& items = data->as_array();
    if (items.size() != n) fail("reply has " + std::to_string(items.size()) + " embeddings for " + std::to_string(n) + " inputs");
    const std::size_t base = out.size();
    out.resize(base + n * o_.dim, 0.f);
    std::vector<bool> seen(n, false);
    for (std::size_t i = 0; i < n; ++i) {
      const auto* item = items[i].if_object();
      const auto* emb = item ? item->if_contains("embedding") : nullptr;
      if (emb == nullptr || !emb->is_array()) fail("data[" + std::to_string(i) + "] has no \"embedding\" array");
      // Servers may answer out of order; "index" says where each vector belongs.
      std::size_t slot = i;
      if (const auto* idx = item->if_contains("index"); idx && idx->is_int64()) {
        if (idx->as_int64() < 0 || static_cast<std::size_t>(idx->as_int64()) >= n) fail("data[" + std::to_string(i) + "].index out of range");
        slot = static_cast<std::size_t>(idx->as_int64());
      }
      if (seen[slot]) fail("duplicate index " + std::to_string(slot));
      seen[slot] = true;
      const auto& values = emb->as_array();
      if (values.size() != o_.dim) {
        fail("embedding has dimension " + std::to_string(values.size()) + ", configured dim is " + std::to_string(o_.dim));
      }
      float* row = out.data() + base + slot * o_.dim;
      for (std::size_t d = 0; d < o_.dim; ++d) {
        if (!values[d].is_number()) fail("embedding value is not a number");
        row[d] = static_cast<float>(values[d].to_number<double>());
      }
      if (!l2_normalize(row, o_.dim)) fail("embedding " + std::to_string(slot) + " is all zeros or not finite");
    }
  }

  OpenAIEmbedderOptions o_;
  Endpoint endpoint_;
};

}  // namespace

std::unique_ptr<Embedder> make_openai_embedder(const OpenAIEmbedderOptions& options) {
  if (options.model.empty()) throw std::invalid_argument("openai embedder: model must be set");
  if (options.dim == 0) throw std::invalid_argument("openai embedder: dim must be set to the endpoint's dimension");
  if (options.max_batch == 0) throw std::invalid_argument("openai embedder: max_batch must be positive");
  return std::make_unique<OpenAIEmbedder>(options);
}

}  // namespace tidegate::cache
