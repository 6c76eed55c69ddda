// Issue 17: what the composed gateway writes for people and scripts to read, through a real
// in-process Gateway: /admin/costs and /dashboard/data.json, and the access log. Counts are
// JSON integers, money and milliseconds plain decimals: never boost::json's exponent form
// ("requests":2.68E2, "duration_ms":9.45222714E2).
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "admin_routes.h"
#include "tidegate/cost/config.h"

namespace tidegate::app {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

bool has_exponent(const std::string& json) {
  const auto bare = std::regex_replace(json, std::regex(R"("(?:[^"\\]|\\.)*")"), "\"\"");
  return std::regex_search(bare, std::regex("[0-9.][eE][-+]?[0-9]"));
}

std::pair<int, std::string> get(int port, const std::string& target, const std::string& post_body = "") {
  net::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  http::request<http::string_body> req{post_body.empty() ? http::verb::get : http::verb::post, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::authorization, "Bearer admin-json-1");
  if (!post_body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = post_body;
    req.prepare_payload();
  }
  http::write(s, req);
  boost::beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(s, buf, res);
  return {static_cast<int>(res.result_int()), res.body()};
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

class JsonOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tidegate-json-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    log_path_ = (dir_ / "access.log").string();
    // The replica's port is closed: nothing here is forwarded.
    gw_ = std::make_unique<gateway::Gateway>(gateway::parse_gateway_config_text(
        "listen: \"127.0.0.1:0\"\nthreads: 1\nadmin_key: admin-json-1\naccess_log: {path: " + log_path_ +
        "}\nmodels:\n  - name: llama\n    health: {interval: 0}\n    replicas:\n"
        "      - {id: r1, url: \"http://127.0.0.1:9\", class: gpu}\n"));
    c_.accounting = cost::make_cost_accounting(
        cost::parse_cost_config(YAML::Load("replica_classes: {gpu: {usd_per_hour: 3.6}}\n"), "cost"), registry_);
    c_.dashboard = std::make_shared<DashboardFeed>(5.0, 12);
    add_admin_routes(*gw_, c_);
    gw_->start();
  }
  void TearDown() override {
    gw_->stop();
    std::filesystem::remove_all(dir_);
  }

  // 268 requests of 42.1 microseconds each on a $0.001/s replica: costs of about 4.2e-8 dollars.
  void serve_268() {
    const double t0 = unix_now() - 30;
    c_.accounting->replica_state("r1", "llama", "gpu", ReplicaState::kActive, t0);
    for (int i = 0; i < 268; ++i) {
      const auto h = c_.accounting->request_started({"llama", "acme", "k", {}}, "r1", t0 + i * 0.01);
      c_.accounting->request_progress(h, 1234, 56, t0 + i * 0.01 + 0.0000421);
      c_.accounting->request_finished(h, t0 + i * 0.01 + 0.0000421);
    }
  }

  std::filesystem::path dir_;
  std::string log_path_;
  prometheus::Registry registry_;
  Components c_;
  std::unique_ptr<gateway::Gateway> gw_;
};

TEST_F(JsonOutput, AdminCostsCountsAreIntegersAndMoneyPlain) {
  serve_268();
  const auto [status, body] = get(gw_->port(), "/admin/costs?by=tenant");
  ASSERT_EQ(status, 200) << body;
  EXPECT_FALSE(has_exponent(body)) << body;
  const auto rep = boost::json::parse(body).as_object();
  const auto& acme = rep.at("rows").at(0).as_object();
  ASSERT_EQ(acme.at("tenant").as_string(), "acme");
  EXPECT_TRUE(acme.at("requests").is_int64());
  EXPECT_EQ(acme.at("requests").as_int64(), 268);
  EXPECT_EQ(acme.at("prompt_tokens").as_int64(), 268 * 1234);
  EXPECT_EQ(acme.at("tokens").as_int64(), 268 * (1234 + 56));
  EXPECT_GT(acme.at("cost_usd").to_number<double>(), 0);
  EXPECT_TRUE(rep.at("totals").at("bill_usd").is_number());

  const auto [dstatus, data] = get(gw_->port(), "/dashboard/data.json");
  ASSERT_EQ(dstatus, 200);
  EXPECT_FALSE(has_exponent(data)) << data;
  EXPECT_TRUE(boost::json::parse(data).at("totals").at("requests").is_int64());
}

TEST_F(JsonOutput, AccessLogMillisecondsArePlainDecimals) {
  // An inference request for a model nobody serves: answered at once, and errors are always logged.
  const auto [status, body] =
      get(gw_->port(), "/v1/chat/completions", R"({"model":"nope","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(status, 404) << body;
  std::vector<std::string> lines;
  for (int i = 0; i < 100 && lines.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    lines = lines_of(log_path_);
  }
  ASSERT_FALSE(lines.empty()) << "no access log line in " << log_path_;
  const auto& line = lines.back();
  EXPECT_FALSE(has_exponent(line)) << line;
  const auto o = boost::json::parse(line).as_object();
  EXPECT_TRUE(o.at("status").is_int64()) << line;
  EXPECT_TRUE(o.at("bytes").is_number()) << line;
  for (const char* k : {"duration_ms", "ttfb_ms", "queue_ms"}) {
    ASSERT_TRUE(o.contains(k)) << k << " in " << line;
    EXPECT_TRUE(o.at(k).is_number()) << k;
    // At most three decimals (the microsecond) in the text.
    EXPECT_TRUE(std::regex_search(line, std::regex("\"" + std::string(k) + "\":-?[0-9]+(\\.[0-9]{1,3})?[,}]")))
        << k << " in " << line;
  }
}

}  // namespace
}  // namespace tidegate::app
