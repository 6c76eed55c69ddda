// tidegate-cost-dashboard-demo: serves the embedded dashboard and a live data.json produced by
// the real CostAccounting running a demo workload, on 127.0.0.1 (port 0 = any free port,
// printed as "PORT <n>"). Exits after --seconds (default 60) so a test can never leave it behind.
// --empty 1: no workload and no replicas, as a gateway that has just started (empty series).
//   GET /dashboard/[file]       embedded assets
//   GET /dashboard/data.json    dashboard_snapshot(now) after simulating up to now
//   GET /admin/costs?by=tenant  report (json)
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <yaml-cpp/yaml.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "tidegate/cost/accounting.h"
#include "tidegate/cost/dashboard_assets.h"
#include "tidegate/common/json_text.h"
#include "workload.h"

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
using namespace tidegate::cost;
using tidegate::common::to_json_text;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct App {
  prometheus::Registry registry;
  std::unique_ptr<CostAccounting> acc;
  std::unique_ptr<demo::Workload> workload;
  std::mutex mu;  // the workload is single-threaded; CostAccounting is not the reason
};

http::response<http::string_body> handle(App& app, const http::request<http::string_body>& req) {
  http::response<http::string_body> res{http::status::ok, req.version()};
  res.keep_alive(false);
  res.set(http::field::cache_control, "no-store");
  std::string target(req.target());
  const auto query = target.find('?');
  const std::string path = target.substr(0, query);
  const std::string prefix = "/dashboard/";
  if (req.method() != http::verb::get) {
    res.result(http::status::method_not_allowed);
  } else if (path == "/dashboard") {
    res.result(http::status::moved_permanently);
    res.set(http::field::location, "/dashboard/");
  } else if (path == "/dashboard/data.json") {
    std::lock_guard lock(app.mu);
    const double t = now_s();
    if (app.workload) app.workload->advance_to(t);
    res.set(http::field::content_type, "application/json");
    res.body() = to_json_text(app.acc->dashboard_snapshot(t));
  } else if (path.rfind(prefix, 0) == 0 && dashboard_asset(path.substr(prefix.size())).found()) {
    const auto asset = dashboard_asset(path.substr(prefix.size()));
    res.set(http::field::content_type, asset.content_type);
    res.body() = std::string(asset.content);
  } else if (path == "/admin/costs") {
    const bool csv = target.find("format=csv") != std::string::npos;
    const auto by = target.find("by=model") != std::string::npos ? "model" : "tenant";
    auto [body, type] = app.acc->report(by, std::nullopt, std::nullopt, csv ? "csv" : "json");
    res.set(http::field::content_type, type);
    res.body() = std::move(body);
  } else {
    res.result(http::status::not_found);
    res.body() = "not found\n";
  }
  res.prepare_payload();
  return res;
}

void session(App& app, tcp::socket socket) {
  timeval tv{5, 0};  // a browser's speculative connection that never speaks must not pin a thread
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  beast::error_code ec;
  beast::flat_buffer buffer;
  http::request<http::string_body> req;
  http::read(socket, buffer, req, ec);
  if (ec) return;
  http::write(socket, handle(app, req), ec);
  socket.shutdown(tcp::socket::shutdown_send, ec);
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  double seconds = 60;
  bool empty = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--port") port = std::stoi(argv[i + 1]);
    else if (flag == "--seconds") seconds = std::stod(argv[i + 1]);
    else if (flag == "--empty") empty = std::string(argv[i + 1]) != "0";
  }
  App app;
  app.acc = make_cost_accounting(parse_cost_config(YAML::Load(demo::kDemoConfig), "cost"), app.registry);
  const double start = now_s();
  if (!empty) {
    app.workload = std::make_unique<demo::Workload>(*app.acc, start - 620);  // ten minutes of history, and a little more
    app.workload->advance_to(start);
  }

  boost::asio::io_context ioc;
  tcp::acceptor acceptor(ioc, {boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  std::printf("PORT %u\n", acceptor.local_endpoint().port());
  std::fflush(stdout);
  std::thread deadline([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    std::_Exit(0);  // bounded lifetime, whatever the browser does
  });
  deadline.detach();
  for (;;) {
    beast::error_code ec;
    tcp::socket socket(ioc);
    acceptor.accept(socket, ec);
    if (ec) continue;
    std::thread([&app, s = std::move(socket)]() mutable { session(app, std::move(s)); }).detach();
  }
}
