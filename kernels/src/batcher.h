#pragma once
// Dynamic micro-batching: concurrent submit() calls are gathered until max_batch sequences are
// waiting or max_wait has passed since the oldest arrived, whichever comes first, and run as one
// batch on the batcher's own thread (which therefore owns the CUDA stream and cuBLAS handle).
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tidegate::kernels::detail {

using TokenIds = std::vector<std::int32_t>;

class MicroBatcher final {
 public:
  // `run` gets at most max_batch sequences and returns seqs.size() * dim floats.
  using RunFn = std::function<std::vector<float>(const std::vector<const TokenIds*>& seqs)>;
  struct Stats {
    std::uint64_t batches = 0;
    std::uint64_t sequences = 0;
    std::uint64_t expired = 0;  // requests dropped because their deadline passed while queued
  };

  // `what` names the batcher in its errors ("gpu encoder", "gpu verifier").
  MicroBatcher(std::size_t max_batch, std::chrono::microseconds max_wait, std::size_t dim, RunFn run,
               std::string what = "gpu encoder");
  MicroBatcher(const MicroBatcher&) = delete;
  MicroBatcher& operator=(const MicroBatcher&) = delete;
  // Fails whatever is still queued, then joins the thread.
  ~MicroBatcher();

  // Blocks until the rows are computed; throws std::runtime_error past the deadline or when run
  // fails. Calls larger than max_batch run as several consecutive batches.
  std::vector<float> submit(std::vector<TokenIds> seqs, std::chrono::steady_clock::time_point deadline);
  Stats stats() const;

 private:
  struct Request {
    std::vector<TokenIds> seqs;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::steady_clock::time_point arrived;
    std::promise<std::vector<float>> done;
  };
  void loop();
  void run_batch(std::vector<std::shared_ptr<Request>>& batch);

  const std::size_t max_batch_;
  const std::chrono::microseconds max_wait_;
  const std::size_t dim_;
  const RunFn run_;
  const std::string what_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Request>> queue_;
  std::size_t queued_seqs_ = 0;
  bool stop_ = false;
  Stats stats_;
  std::thread thread_;  // last: starts after everything above is initialised
};

}  // namespace tidegate::kernels::detail
