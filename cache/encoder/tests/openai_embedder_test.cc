// Against a real HTTP server on 127.0.0.1 (Beast, on its own thread): deterministic vectors,
// out-of-order replies, errors, and a server that never answers.
#include "tidegate/cache/openai_embedder.h"

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <cmath>
#include <mutex>
#include <thread>

namespace tidegate::cache {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

enum class Mode { kVectors, kHang, kError, kGarbage, kWrongDim };

class FakeServer {
 public:
  explicit FakeServer(Mode mode) : mode_(mode), acceptor_(ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    accept();
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~FakeServer() {
    ioc_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + "/v1"; }
  std::vector<std::string> auth_headers() const {
    std::lock_guard lk(mu_);
    return auth_headers_;
  }
  std::vector<std::size_t> batch_sizes() const {
    std::lock_guard lk(mu_);
    return batch_sizes_;
  }

 private:
  struct Session {
    explicit Session(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    http::response<http::string_body> res;
  };

  void accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;
      auto s = std::make_shared<Session>(std::move(socket));
      http::async_read(s->socket, s->buffer, s->req, [this, s](beast::error_code ec2, std::size_t) {
        if (!ec2) respond(s);
      });
      accept();
    });
  }

  void respond(const std::shared_ptr<Session>& s) {
    std::lock_guard lk(mu_);
    auth_headers_.emplace_back(s->req[http::field::authorization]);
    if (mode_ == Mode::kHang) {
      hung_.push_back(s);  // keep the socket open, never answer
      return;
    }
    s->res.version(11);
    s->res.result(http::status::ok);
    s->res.set(http::field::content_type, "application/json");
    const auto input = boost::json::parse(s->req.body()).at("input").as_array();
    batch_sizes_.push_back(input.size());
    if (mode_ == Mode::kError) {
      s->res.result(http::status::service_unavailable);
      s->res.body() = R"({"error":"model loading"})";
    } else if (mode_ == Mode::kGarbage) {
      s->res.body() = "not json";
    } else {
      // Vector for text t: [len(t), 1, 0, 2] (unnormalised), listed in reverse order with index.
      boost::json::array data;
      for (std::size_t i = input.size(); i-- > 0;) {
        const double len = static_cast<double>(input[i].as_string().size());
        boost::json::array emb{len, 1.0, 0.0, 2.0};
        if (mode_ == Mode::kWrongDim) emb.emplace_back(5.0);
        data.push_back(boost::json::object{{"object", "embedding"}, {"index", i}, {"embedding", emb}});
      }
      s->res.body() = boost::json::serialize(boost::json::object{{"object", "list"}, {"data", data}});
    }
    s->res.prepare_payload();
    http::async_write(s->socket, s->res, [s](beast::error_code, std::size_t) {});
  }

  mutable std::mutex mu_;
  std::vector<std::string> auth_headers_;
  std::vector<std::size_t> batch_sizes_;
  Mode mode_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  std::vector<std::shared_ptr<Session>> hung_;
  std::thread thread_;
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
}  // namespace tidegate::cache
