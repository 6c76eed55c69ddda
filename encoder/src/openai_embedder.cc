// Embeddings over the shared blocking client (tidegate/common/http_client.h): connections to the
// endpoint are kept alive between batches and between embed() calls (up to four idle ones).
#include "tidegate/encoder/openai_embedder.h"

#include <boost/json.hpp>
#include <stdexcept>

#include "minilm_internal.h"
#include "tidegate/common/http_client.h"
#include "tidegate/common/url.h"

namespace tidegate::encoder {
namespace {

using Clock = std::chrono::steady_clock;

struct Endpoint {
  common::HttpUrl url;
  std::string text;  // for messages
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
  const std::string text = "http://" + u.authority() + u.target();
  return {std::move(u), text};
}

common::HttpClientOptions client_options() {
  common::HttpClientOptions o;
  o.schemes = common::UrlSchemes::kHttp;
  o.max_body_bytes = 64 << 20;
  return o;
}

class OpenAIEmbedder final : public Embedder {
 public:
  explicit OpenAIEmbedder(const OpenAIEmbedderOptions& o) : o_(o), endpoint_(parse_url(o.url)), http_(client_options()) {}

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
    throw std::runtime_error("openai embedder " + endpoint_.text + ": " + why);
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

  std::string post(std::string body, Clock::time_point until) {
    if (Clock::now() >= until) fail("deadline exceeded before sending");
    common::HttpClient::Headers headers{{"Content-Type", "application/json"}, {"Accept", "application/json"}};
    if (!o_.api_key.empty()) headers.emplace_back("Authorization", "Bearer " + o_.api_key);
    auto res = http_.request("POST", endpoint_.url, headers, std::move(body), until);
    if (!res.ok()) fail(res.error);
    if (res.status < 200 || res.status >= 300) fail("HTTP " + std::to_string(res.status) + ": " + res.body.substr(0, 300));
    return std::move(res.body);
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
  common::HttpClient http_;  // shared by the pool's workers (it is thread-safe)
};

}  // namespace

std::unique_ptr<Embedder> make_openai_embedder(const OpenAIEmbedderOptions& options) {
  if (options.model.empty()) throw std::invalid_argument("openai embedder: model must be set");
  if (options.dim == 0) throw std::invalid_argument("openai embedder: dim must be set to the endpoint's dimension");
  if (options.max_batch == 0) throw std::invalid_argument("openai embedder: max_batch must be positive");
  return std::make_unique<OpenAIEmbedder>(options);
}

}  // namespace tidegate::encoder
