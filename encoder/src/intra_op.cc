#include "intra_op.h"

#include <immintrin.h>

#include <chrono>

namespace tidegate::encoder {
namespace {

// Long enough to span the gap between two layer products of one forward pass, short enough
// that an idle encoder gives its cores back at once.
constexpr auto kSpin = std::chrono::microseconds(100);

}  // namespace

IntraOpPool::IntraOpPool(std::size_t helpers) {
  helpers_.reserve(helpers);
  // Each helper starts from the epoch as it is now, not as it is when its thread gets to run:
  // a task or the destructor's stop may come first, and a helper that read the epoch after that
  // bump would wait for the next one, forever in the destructor's case.
  const std::uint64_t start = epoch_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < helpers; ++i) helpers_.emplace_back([this, start] { helper_loop(start); });
}

IntraOpPool::~IntraOpPool() {
  stop_.store(true, std::memory_order_release);
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  epoch_.notify_all();
  for (auto& t : helpers_) t.join();
}

void IntraOpPool::work(Task& task) {
  for (std::size_t p = task.next.fetch_add(1, std::memory_order_relaxed); p < task.parts;
       p = task.next.fetch_add(1, std::memory_order_relaxed)) {
    (*task.fn)(p);
    task.done.fetch_add(1, std::memory_order_release);
  }
}

void IntraOpPool::run(std::size_t parts, const std::function<void(std::size_t)>& fn) {
  std::unique_lock lock(owner_, std::try_to_lock);
  if (!lock || parts < 2 || helpers_.empty()) {
    for (std::size_t p = 0; p < parts; ++p) fn(p);
    return;
  }
  // A helper that wakes late holds the task it saw; fn is only called for a part below `parts`,
  // and the caller does not return before all of those are done, so fn outlives every call.
  auto task = std::make_shared<Task>();
  task->fn = &fn;
  task->parts = parts;
  {
    std::lock_guard guard(task_mu_);
    task_ = task;
  }
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  epoch_.notify_all();
  work(*task);
  while (task->done.load(std::memory_order_acquire) < parts) _mm_pause();
}

void IntraOpPool::helper_loop(std::uint64_t seen) {
  while (true) {
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    while (epoch_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < spin_until)
      _mm_pause();
    epoch_.wait(seen, std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    seen = epoch_.load(std::memory_order_acquire);
    std::shared_ptr<Task> task;
    {
      std::lock_guard guard(task_mu_);
      task = task_;
    }
    if (task) work(*task);
  }
}

}  // namespace tidegate::encoder
