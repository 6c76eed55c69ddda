#pragma once
// Fires callbacks at their deadlines from one thread, unless cancelled first. Lets a lookup
// fail open on time even when every worker is stuck inside a slow embedder.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace tidegate::cache {

class DeadlineWatch final {
 public:
  using Clock = std::chrono::steady_clock;
  DeadlineWatch() : thread_([this] { run(); }) {}
  ~DeadlineWatch() { stop(); }
  DeadlineWatch(const DeadlineWatch&) = delete;
  DeadlineWatch& operator=(const DeadlineWatch&) = delete;

  // The callback must be cheap and must tolerate running after the work it guards finished.
  void at(Clock::time_point when, std::function<void()> fn) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      timers_.emplace(when, std::move(fn));
    }
    cv_.notify_one();
  }

  // Runs every pending callback now, then joins.
  void stop() {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      if (stopping_) {
        auto rest = std::move(timers_);
        lock.unlock();
        for (auto& [when, fn] : rest) fn();
        return;
      }
      if (timers_.empty()) {
        cv_.wait(lock);
        continue;
      }
      const auto first = timers_.begin()->first;
      if (Clock::now() < first) {
        cv_.wait_until(lock, first);
        continue;
      }
      auto fn = std::move(timers_.begin()->second);
      timers_.erase(timers_.begin());
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::function<void()>> timers_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tidegate::cache
