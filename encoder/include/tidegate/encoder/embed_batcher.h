#pragma once
// A worker pool in front of an Embedder: event loops submit one text and get a callback; the
// workers gather texts that arrive together into one embed() call. Batching is "natural": a
// worker takes what is queued at once, and waits up to max_wait for more only while another
// worker is busy (under load), so a lone request at idle pays no batching delay.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tidegate/encoder/embedder.h"

namespace tidegate::encoder {

struct EmbedBatcherOptions {
  std::size_t threads = 1;
  std::size_t max_batch = 32;                       // texts per embed() call
  std::chrono::microseconds max_wait{300};          // extra gathering time, only under load
  std::size_t max_queue = 4096;                     // beyond this, submit fails at once
};

// What a callback's exception_ptr holds when the batcher itself gives up on a text.
class EmbedBatcherError final : public std::runtime_error {
 public:
  enum class Reason { kDeadline, kShutdown, kOverloaded };
  EmbedBatcherError(Reason reason, const std::string& what) : std::runtime_error(what), reason_(reason) {}
  Reason reason() const { return reason_; }

 private:
  Reason reason_;
};

class EmbedBatcher final {
 public:
  // Called exactly once per submit: the dim() floats of the text, or an exception (the
  // embedder's own, or EmbedBatcherError). Runs on a worker or reaper thread, or inline in
  // submit() when the text is refused at once (shut down, queue full, deadline already past);
  // it must not block and should post back to the caller's event loop.
  using Callback = std::function<void(std::vector<float>, std::exception_ptr)>;

  struct Stats {
    std::size_t batches = 0, texts = 0, expired = 0, refused = 0, failed = 0;
  };

  // Throws std::invalid_argument on a null embedder or zero threads/max_batch.
  EmbedBatcher(std::shared_ptr<Embedder> embedder, const EmbedBatcherOptions& options);
  ~EmbedBatcher();  // shutdown()
  EmbedBatcher(const EmbedBatcher&) = delete;
  EmbedBatcher& operator=(const EmbedBatcher&) = delete;

  // The deadline bounds the wait: past it the callback gets kDeadline even if the embedder is
  // still busy (its result is then dropped).
  void submit(std::string text, std::chrono::steady_clock::time_point deadline, Callback done);
  std::future<std::vector<float>> submit(std::string text, std::chrono::steady_clock::time_point deadline);

  // Stops accepting, lets running batches finish, fails queued texts with kShutdown, joins.
  // Idempotent.
  void shutdown();

  std::size_t dim() const { return dim_; }
  Stats stats() const;

 private:
  struct Item;
  using ItemPtr = std::shared_ptr<Item>;
  void worker();
  void reaper();
  // Delivers the outcome unless someone already did; counts it in *counter (before the callback
  // runs, so a caller that saw its callback also sees the count).
  static void finish(const ItemPtr& item, std::vector<float> vec, std::exception_ptr error,
                     std::atomic<std::size_t>* counter);

  const std::shared_ptr<Embedder> embedder_;
  const EmbedBatcherOptions options_;
  const std::size_t dim_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable reaper_cv_;
  std::deque<ItemPtr> queue_;
  std::list<std::vector<ItemPtr>> in_flight_;
  std::size_t busy_ = 0;
  bool stopping_ = false;
  std::atomic<std::size_t> batches_{0}, texts_{0}, expired_{0}, refused_{0}, failed_{0};
  std::chrono::steady_clock::time_point reaper_target_ = std::chrono::steady_clock::time_point::max();
  std::vector<std::thread> workers_;
  std::thread reaper_thread_;
};

}  // namespace tidegate::encoder
