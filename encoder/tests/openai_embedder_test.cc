// Against a real HTTP server on 127.0.0.1 (the shared test server): deterministic vectors,
// out-of-order replies, errors, and a server that never answers.
#include "tidegate/encoder/openai_embedder.h"

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/json.hpp>
#include <cmath>

#include "tidegate/testing/fake_http_server.h"

namespace tidegate::encoder {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

enum class Mode { kVectors, kHang, kError, kGarbage, kWrongDim };

using tidegate::testing::FakeHttpServer;
using tidegate::testing::FakeRequest;
using tidegate::testing::FakeResponse;

// An embedding endpoint that answers in one way (`mode`), on the shared test server.
FakeResponse answer(Mode mode, const FakeRequest& req) {
  if (mode == Mode::kHang) {
    FakeResponse never;
    never.hang = true;  // keep the socket open, never answer
    return never;
  }
  if (mode == Mode::kError) return {503, R"({"error":"model loading"})"};
  if (mode == Mode::kGarbage) return {200, "not json"};
  // Vector for text t: [len(t), 1, 0, 2] (unnormalised), listed in reverse order with index.
  const auto input = boost::json::parse(req.body).at("input").as_array();
  boost::json::array data;
  for (std::size_t i = input.size(); i-- > 0;) {
    const double len = static_cast<double>(input[i].as_string().size());
    boost::json::array emb{len, 1.0, 0.0, 2.0};
    if (mode == Mode::kWrongDim) emb.emplace_back(5.0);
    data.push_back(boost::json::object{{"object", "embedding"}, {"index", i}, {"embedding", emb}});
  }
  return {200, boost::json::serialize(boost::json::object{{"object", "list"}, {"data", data}})};
}

class FakeServer {
 public:
  explicit FakeServer(Mode mode) : server_([mode](const FakeRequest& r) { return answer(mode, r); }) {}
  std::string url() const { return server_.url() + "/v1"; }
  std::vector<std::string> auth_headers() const {
    std::vector<std::string> out;
    for (auto& r : server_.requests()) out.push_back(r.headers.count("authorization") ? r.headers.at("authorization") : "");
    return out;
  }
  std::vector<std::size_t> batch_sizes() const {
    std::vector<std::size_t> out;
    for (auto& r : server_.requests()) out.push_back(boost::json::parse(r.body).at("input").as_array().size());
    return out;
  }
  int connections() const { return server_.connections(); }

 private:
  FakeHttpServer server_;
};

OpenAIEmbedderOptions options_for(const FakeServer& server) {
  OpenAIEmbedderOptions o;
  o.url = server.url();
  o.model = "test-embed";
  o.dim = 4;
  o.max_batch = 3;
  o.timeout = 3000ms;
  return o;
}

std::string error_of(Embedder& e, const std::vector<std::string>& texts, Clock::time_point deadline) {
  try {
    e.embed(texts, deadline);
  } catch (const std::runtime_error& err) {
    return err.what();
  }
  return "no error";
}

TEST(OpenAIEmbedder, BatchesOrdersAndNormalises) {
  FakeServer server(Mode::kVectors);
  auto o = options_for(server);
  o.api_key = "sk-test";
  auto e = make_openai_embedder(o);
  EXPECT_EQ(e->name(), "openai");
  EXPECT_EQ(e->dim(), 4u);
  const std::vector<std::string> texts = {"a", "bb", "", "dddd", "eeeee"};
  const auto v = e->embed(texts, Clock::now() + 5s);
  ASSERT_EQ(v.size(), texts.size() * 4);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const double len = texts[i].empty() ? 1.0 : static_cast<double>(texts[i].size());  // "" is sent as " "
    const double norm = std::sqrt(len * len + 1 + 4);
    EXPECT_NEAR(v[i * 4], len / norm, 1e-6) << i;
    EXPECT_NEAR(v[i * 4 + 3], 2 / norm, 1e-6) << i;
  }
  EXPECT_EQ(server.batch_sizes(), (std::vector<std::size_t>{3, 2}));
  const auto auth = server.auth_headers();
  ASSERT_EQ(auth.size(), 2u);
  EXPECT_EQ(auth[0], "Bearer sk-test");
  EXPECT_TRUE(e->embed({}, Clock::now() + 1s).empty());
}

TEST(OpenAIEmbedder, HangingServerTimesOutWithAClearMessage) {
  FakeServer server(Mode::kHang);
  auto o = options_for(server);
  o.timeout = 200ms;
  auto e = make_openai_embedder(o);
  const auto start = Clock::now();
  const auto err = error_of(*e, {"x"}, Clock::now() + 10s);
  EXPECT_NE(err.find("timed out during receive"), std::string::npos) << err;
  EXPECT_NE(err.find(server.url()), std::string::npos) << err;
  EXPECT_LT(Clock::now() - start, 5s);
  // The caller's deadline caps the timeout too.
  o.timeout = 10000ms;
  auto e2 = make_openai_embedder(o);
  EXPECT_NE(error_of(*e2, {"x"}, Clock::now() + 150ms).find("timed out"), std::string::npos);
  EXPECT_NE(error_of(*e2, {"x"}, Clock::now() - 1ms).find("deadline"), std::string::npos);
}

TEST(OpenAIEmbedder, ServerErrorsAndBadRepliesThrow) {
  {
    FakeServer server(Mode::kError);
    auto e = make_openai_embedder(options_for(server));
    const auto err = error_of(*e, {"x"}, Clock::now() + 5s);
    EXPECT_NE(err.find("HTTP 503"), std::string::npos) << err;
    EXPECT_NE(err.find("model loading"), std::string::npos) << err;
  }
  {
    FakeServer server(Mode::kGarbage);
    auto e = make_openai_embedder(options_for(server));
    EXPECT_NE(error_of(*e, {"x"}, Clock::now() + 5s).find("not JSON"), std::string::npos);
  }
  {
    FakeServer server(Mode::kWrongDim);
    auto e = make_openai_embedder(options_for(server));
    EXPECT_NE(error_of(*e, {"x"}, Clock::now() + 5s).find("dimension 5"), std::string::npos);
  }
}

TEST(OpenAIEmbedder, RefusedConnectionAndBadOptions) {
  std::uint16_t port;
  {
    asio::io_context ioc;
    tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  OpenAIEmbedderOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/embeddings";
  o.model = "m";
  o.dim = 4;
  auto e = make_openai_embedder(o);
  EXPECT_NE(error_of(*e, {"x"}, Clock::now() + 5s).find("connect failed"), std::string::npos);
  o.url = "https://api.openai.com/v1";
  EXPECT_THROW(make_openai_embedder(o), std::invalid_argument);
  o.url = "http:///v1";
  EXPECT_THROW(make_openai_embedder(o), std::invalid_argument);
  o.url = "http://127.0.0.1:1/v1";
  o.dim = 0;
  EXPECT_THROW(make_openai_embedder(o), std::invalid_argument);
}

}  // namespace
}  // namespace tidegate::encoder
