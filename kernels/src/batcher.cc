#include "batcher.h"

#include <exception>
#include <stdexcept>

namespace tidegate::kernels::detail {

MicroBatcher::MicroBatcher(std::size_t max_batch, std::chrono::microseconds max_wait, std::size_t dim, RunFn run,
                           std::string what)
    : max_batch_(max_batch ? max_batch : 1), max_wait_(max_wait), dim_(dim), run_(std::move(run)), what_(std::move(what)),
      thread_([this] { loop(); }) {}

MicroBatcher::~MicroBatcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<float> MicroBatcher::submit(std::vector<TokenIds> seqs, std::chrono::steady_clock::time_point deadline) {
  if (seqs.empty()) return {};
  auto req = std::make_shared<Request>();
  req->seqs = std::move(seqs);
  req->deadline = deadline;
  req->arrived = std::chrono::steady_clock::now();
  auto fut = req->done.get_future();
  {
    std::lock_guard lock(mu_);
    if (stop_) throw std::runtime_error(what_ + " is shutting down");
    queued_seqs_ += req->seqs.size();
    queue_.push_back(req);
  }
  cv_.notify_all();
  // The request stays owned by the queue too, so a late result after our deadline is harmless.
  if (fut.wait_until(deadline) != std::future_status::ready)
    throw std::runtime_error(what_ + ": deadline passed before the batch finished");
  return fut.get();
}

MicroBatcher::Stats MicroBatcher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void MicroBatcher::loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    const auto window_end = queue_.front()->arrived + max_wait_;
    cv_.wait_until(lock, window_end, [&] { return stop_ || queued_seqs_ >= max_batch_; });
    if (stop_) break;
    std::vector<std::shared_ptr<Request>> batch;
    std::size_t taken = 0;
    // Whole requests only, so each caller's rows come back from as few batches as possible; a
    // request bigger than max_batch goes alone and is chunked in run_batch.
    while (!queue_.empty() && (batch.empty() || taken + queue_.front()->seqs.size() <= max_batch_)) {
      taken += queue_.front()->seqs.size();
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    queued_seqs_ -= taken;
    lock.unlock();
    run_batch(batch);
    lock.lock();
  }
  for (auto& req : queue_) req->done.set_exception(std::make_exception_ptr(std::runtime_error(what_ + " stopped")));
  queue_.clear();
}

void MicroBatcher::run_batch(std::vector<std::shared_ptr<Request>>& batch) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Request>> live, late;
  for (auto& req : batch) {
    if (req->deadline <= now) {
      late.push_back(std::move(req));
    } else {
      live.push_back(std::move(req));
    }
  }
  // Every count is made before the callers it covers are answered, so a caller that reads
  // stats() afterwards sees its own request in them.
  if (!late.empty()) {
    {
      std::lock_guard lock(mu_);
      stats_.expired += late.size();
    }
    for (auto& req : late)
      req->done.set_exception(std::make_exception_ptr(std::runtime_error(what_ + ": deadline passed while queued")));
  }
  std::vector<const TokenIds*> all;
  for (const auto& req : live)
    for (const auto& s : req->seqs) all.push_back(&s);
  std::vector<float> rows;
  std::uint64_t batches = 0;
  std::exception_ptr failure;
  try {
    rows.reserve(all.size() * dim_);
    for (std::size_t begin = 0; begin < all.size(); begin += max_batch_) {
      const std::size_t end = std::min(all.size(), begin + max_batch_);
      const std::vector<const TokenIds*> chunk(all.begin() + static_cast<std::ptrdiff_t>(begin),
                                               all.begin() + static_cast<std::ptrdiff_t>(end));
      std::vector<float> out = run_(chunk);
      if (out.size() != chunk.size() * dim_) throw std::runtime_error(what_ + " returned a wrong-sized batch");
      rows.insert(rows.end(), out.begin(), out.end());
      ++batches;
    }
  } catch (...) {
    failure = std::current_exception();
  }
  {
    std::lock_guard lock(mu_);
    stats_.batches += batches;
    stats_.sequences += all.size();
  }
  if (failure) {
    for (auto& req : live) req->done.set_exception(failure);
    return;
  }
  std::size_t offset = 0;
  for (auto& req : live) {
    const std::size_t n = req->seqs.size() * dim_;
    req->done.set_value(std::vector<float>(rows.begin() + static_cast<std::ptrdiff_t>(offset),
                                           rows.begin() + static_cast<std::ptrdiff_t>(offset + n)));
    offset += n;
  }
}

}  // namespace tidegate::kernels::detail
