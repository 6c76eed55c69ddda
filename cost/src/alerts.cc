#include "alerts.h"

#include <chrono>

#include "tidegate/common/json_text.h"
#include "tidegate/common/log.h"

namespace tidegate::cost {
using common::to_json_text;
namespace {

common::HttpClientOptions webhook_client(double timeout_s) {
  common::HttpClientOptions o;
  o.user_agent = "tidegate-cost";
  o.connect_timeout = std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
  o.read_timeout = o.connect_timeout;  // a stuck receiver must not stall later alerts
  o.schemes = common::UrlSchemes::kHttp;
  return o;
}

}  // namespace

AlertDispatcher::AlertDispatcher(std::string webhook_url, double timeout_s)
    : url_(std::move(webhook_url)), http_(webhook_client(timeout_s)), worker_([this] { run(); }) {}

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

bool AlertDispatcher::deliver(const std::string& body, std::string* error) {
  const auto r = http_.request("POST", url_, {{"Content-Type", "application/json"}}, body);
  if (!r.ok()) {
    *error = r.error;
    return false;
  }
  if (r.status >= 300) {
    *error = "status " + std::to_string(r.status);
    return false;
  }
  return true;
}

}  // namespace tidegate::cost
