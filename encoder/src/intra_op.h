#pragma once
// Splits one embed() call's dense layers across idle cores. The embedder's worker pool already
// runs one call per thread; this is for the call that runs alone on a machine with idle cores,
// where a short prompt's latency is what the cache adds to a request. Helpers spin briefly
// between the 24 layer products of one forward pass (the gaps are tens of microseconds), then
// sleep. A second concurrent caller does not wait for the pool: it runs its parts itself.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tidegate::encoder {

class IntraOpPool final {
 public:
  explicit IntraOpPool(std::size_t helpers);
  ~IntraOpPool();
  IntraOpPool(const IntraOpPool&) = delete;
  IntraOpPool& operator=(const IntraOpPool&) = delete;

  std::size_t threads() const { return helpers_.size() + 1; }
  // Runs fn(0) ... fn(parts - 1), the caller taking parts too; returns when all are done.
  void run(std::size_t parts, const std::function<void(std::size_t)>& fn);

 private:
  struct Task {
    const std::function<void(std::size_t)>* fn;
    std::size_t parts;
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> done{0};
  };
  static void work(Task& task);
  void helper_loop(std::uint64_t seen);

  std::mutex owner_;                       // held by the one caller using the helpers
  std::atomic<std::uint64_t> epoch_{0};    // bumped per task; helpers wait on it
  // A plain mutex, not std::atomic<shared_ptr>: libstdc++ 12 implements that one with a lock bit
  // inside the pointer which ThreadSanitizer cannot see, and the lock is taken once per layer
  // product per helper, nothing next to the product itself.
  std::mutex task_mu_;
  std::shared_ptr<Task> task_;  // guarded by task_mu_
  std::atomic<bool> stop_{false};
  std::vector<std::thread> helpers_;
};

}  // namespace tidegate::encoder
