#pragma once
// A fixed pool of threads draining one FIFO queue. Jobs receive `stopping` so that, during
// shutdown, queued lookups can answer at once while queued inserts still run.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tidegate::cache {

class WorkerPool final {
 public:
  using Job = std::function<void(bool stopping)>;

  explicit WorkerPool(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
  }
  ~WorkerPool() { stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False when stopped or when the queue already holds `max_queue` jobs.
  bool post(Job job, std::size_t max_queue = static_cast<std::size_t>(-1)) {
    {
      std::lock_guard lock(mu_);
      if (stopping_ || queue_.size() >= max_queue) return false;
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }

  // Runs every queued job (with stopping = true) and joins the threads.
  void stop() {
    {
      std::lock_guard lock(mu_);
      if (stopping_ && threads_.empty()) return;
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

  std::size_t queued() const {
    std::lock_guard lock(mu_);
    return queue_.size();
  }

 private:
  void run() {
    for (;;) {
      Job job;
      bool stopping;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        stopping = stopping_;
      }
      job(stopping);
    }
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tidegate::cache
