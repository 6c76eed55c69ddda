#include "alerts.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <stdexcept>

#include "tidegate/common/log.h"
#include "tidegate/common/url.h"
#include "tidegate/common/json_text.h"

namespace tidegate::cost {
using common::to_json_text;
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

}  // namespace

AlertDispatcher::AlertDispatcher(std::string webhook_url, double timeout_s)
    : url_(std::move(webhook_url)), timeout_s_(timeout_s), worker_([this] { run(); }) {}

AlertDispatcher::~AlertDispatcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void AlertDispatcher::post(boost::json::object alert) {
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= kMaxQueue) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(alert));
  }
  cv_.notify_one();
}

bool AlertDispatcher::wait_idle(double timeout_s) {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                           [this] { return queue_.empty() && !busy_; });
}

void AlertDispatcher::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop requested and nothing left
    auto alert = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    log::warn("cost.budget_alert", {{"alert", alert}});
    if (!url_.empty()) {
      std::string error;
      if (deliver(to_json_text(alert), &error)) {
        ++delivered_;
      } else {
        ++failed_;
        log::error("cost.webhook_failed", {{"url", url_}, {"error", error}});
      }
    }
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
    if (stop_ && queue_.empty()) return;
  }
}

bool AlertDispatcher::deliver(const std::string& body, std::string* error) const {
  common::HttpUrl url;
  try {
    url = common::parse_http_url(url_);
  } catch (const std::invalid_argument& e) {
    *error = std::string("bad url: ") + e.what();
    return false;
  }
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  const auto timeout = std::chrono::milliseconds(static_cast<long>(timeout_s_ * 1000));
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  const auto endpoints = resolver.resolve(url.host, std::to_string(url.port), ec);
  if (ec) {
    *error = "resolve: " + ec.message();
    return false;
  }
  http::request<http::string_body> req{http::verb::post, url.target(), 11};
  req.set(http::field::host, url.authority());
  req.set(http::field::content_type, "application/json");
  req.set(http::field::user_agent, "tidegate-cost");
  req.body() = body;
  req.prepare_payload();
  http::response<http::string_body> res;
  beast::flat_buffer buffer;
  bool done = false;
  // Async with a deadline on every step: a stuck receiver must not stall later alerts.
  stream.expires_after(timeout);
  stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) {
    if (e) {
      ec = e;
      return;
    }
    stream.expires_after(timeout);
    http::async_write(stream, req, [&](beast::error_code e2, std::size_t) {
      if (e2) {
        ec = e2;
        return;
      }
      stream.expires_after(timeout);
      http::async_read(stream, buffer, res, [&](beast::error_code e3, std::size_t) {
        ec = e3;
        done = !e3;
      });
    });
  });
  ioc.run();
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  if (!done) {
    *error = "post: " + (ec ? ec.message() : std::string("incomplete"));
    return false;
  }
  if (res.result_int() >= 300) {
    *error = "status " + std::to_string(res.result_int());
    return false;
  }
  return true;
}

}  // namespace tidegate::cost
