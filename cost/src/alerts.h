#pragma once
// Delivers budget alerts off the request path: one worker thread writes the log event and POSTs
// the optional webhook (bounded queue, timeouts to connect and to answer, the connection kept
// alive between alerts, failures logged and counted).
#include <boost/json.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "tidegate/common/http_client.h"

namespace tidegate::cost {

class AlertDispatcher final {
 public:
  static constexpr std::size_t kMaxQueue = 1000;

  AlertDispatcher(std::string webhook_url, double timeout_s);
  ~AlertDispatcher();
  AlertDispatcher(const AlertDispatcher&) = delete;
  AlertDispatcher& operator=(const AlertDispatcher&) = delete;

  void post(boost::json::object alert);  // never blocks on the network
  // Test hook: waits until the queue is empty and the worker is idle (bounded by timeout_s).
  bool wait_idle(double timeout_s);

  std::uint64_t delivered() const { return delivered_; }
  std::uint64_t failed() const { return failed_; }
  std::uint64_t dropped() const { return dropped_; }

 private:
  void run();
  bool deliver(const std::string& body, std::string* error);

  std::string url_;
  common::HttpClient http_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<boost::json::object> queue_;
  bool stop_ = false;
  bool busy_ = false;
  std::atomic<std::uint64_t> delivered_{0}, failed_{0}, dropped_{0};
  std::thread worker_;
};

}  // namespace tidegate::cost
