#include "tidegate/encoder/embed_batcher.h"

#include <algorithm>

namespace tidegate::encoder {

using Clock = std::chrono::steady_clock;

struct EmbedBatcher::Item {
  std::string text;
  Clock::time_point deadline;
  Clock::time_point enqueued;
  Callback done;
  std::atomic<bool> delivered{false};
};

namespace {

std::exception_ptr batcher_error(EmbedBatcherError::Reason reason, const char* what) {
  return std::make_exception_ptr(EmbedBatcherError(reason, what));
}

}  // namespace

EmbedBatcher::EmbedBatcher(std::shared_ptr<Embedder> embedder, const EmbedBatcherOptions& options)
    : embedder_(std::move(embedder)), options_(options), dim_(embedder_ ? embedder_->dim() : 0) {
  if (!embedder_) throw std::invalid_argument("embed batcher: no embedder");
  if (options_.threads == 0 || options_.max_batch == 0) {
    throw std::invalid_argument("embed batcher: threads and max_batch must be positive");
  }
  for (std::size_t i = 0; i < options_.threads; ++i) workers_.emplace_back([this] { worker(); });
  reaper_thread_ = std::thread([this] { reaper(); });
}

EmbedBatcher::~EmbedBatcher() { shutdown(); }

void EmbedBatcher::finish(const ItemPtr& item, std::vector<float> vec, std::exception_ptr error,
                          std::atomic<std::size_t>* counter) {
  if (item->delivered.exchange(true)) return;
  if (counter != nullptr) counter->fetch_add(1);
  Callback done = std::move(item->done);
  try {
    done(std::move(vec), std::move(error));
  } catch (...) {
    // A throwing callback is a caller bug; it must not take a worker thread down with it.
  }
}

void EmbedBatcher::submit(std::string text, Clock::time_point deadline, Callback done) {
  auto item = std::make_shared<Item>();
  item->text = std::move(text);
  item->deadline = deadline;
  item->enqueued = Clock::now();
  item->done = std::move(done);
  std::exception_ptr refused;
  {
    std::lock_guard lk(mu_);
    if (stopping_) {
      refused = batcher_error(EmbedBatcherError::Reason::kShutdown, "embed batcher: shut down");
    } else if (deadline <= item->enqueued) {
      refused = batcher_error(EmbedBatcherError::Reason::kDeadline, "embed batcher: deadline exceeded");
    } else if (queue_.size() >= options_.max_queue) {
      refused = batcher_error(EmbedBatcherError::Reason::kOverloaded, "embed batcher: queue full");
    }
    if (!refused) {
      queue_.push_back(item);
      if (deadline < reaper_target_) {
        reaper_target_ = deadline;
        reaper_cv_.notify_one();
      }
    }
  }
  if (refused) {
    finish(item, {}, refused, &refused_);
    return;
  }
  work_cv_.notify_one();
}

std::future<std::vector<float>> EmbedBatcher::submit(std::string text, Clock::time_point deadline) {
  auto promise = std::make_shared<std::promise<std::vector<float>>>();
  auto future = promise->get_future();
  submit(std::move(text), deadline, [promise](std::vector<float> vec, std::exception_ptr error) {
    if (error) {
      promise->set_exception(error);
    } else {
      promise->set_value(std::move(vec));
    }
  });
  return future;
}

void EmbedBatcher::worker() {
  std::unique_lock lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    if (queue_.size() < options_.max_batch && busy_ > 0 && options_.max_wait.count() > 0) {
      const auto until = queue_.front()->enqueued + options_.max_wait;
      work_cv_.wait_until(lk, until, [&] { return stopping_ || queue_.empty() || queue_.size() >= options_.max_batch; });
      if (stopping_) return;
      if (queue_.empty()) continue;
    }
    std::vector<ItemPtr> batch;
    while (!queue_.empty() && batch.size() < options_.max_batch) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    const auto slot = in_flight_.insert(in_flight_.end(), batch);
    ++busy_;
    batches_.fetch_add(1);
    texts_.fetch_add(batch.size());
    lk.unlock();

    std::vector<std::string> texts;
    texts.reserve(batch.size());
    Clock::time_point deadline = Clock::time_point::min();
    for (const auto& item : batch) {
      texts.push_back(std::move(item->text));
      deadline = std::max(deadline, item->deadline);
    }
    std::vector<float> vecs;
    std::exception_ptr error;
    try {
      vecs = embedder_->embed(texts, deadline);
      if (vecs.size() != batch.size() * dim_) throw std::runtime_error("embed batcher: embedder returned a wrong size");
    } catch (...) {
      error = std::current_exception();
    }
    const auto now = Clock::now();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (error) {
        finish(batch[i], {}, error, &failed_);
      } else if (now > batch[i]->deadline) {
        finish(batch[i], {}, batcher_error(EmbedBatcherError::Reason::kDeadline, "embed batcher: deadline exceeded"),
               &expired_);
      } else {
        finish(batch[i], std::vector<float>(vecs.begin() + i * dim_, vecs.begin() + (i + 1) * dim_), nullptr, nullptr);
      }
    }
    lk.lock();
    in_flight_.erase(slot);
    --busy_;
  }
}

// Delivers kDeadline to texts whose deadline passes while they wait or while their batch runs,
// so a stuck embedder can delay a caller by no more than its own deadline.
void EmbedBatcher::reaper() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    const auto now = Clock::now();
    std::vector<ItemPtr> expired;
    auto next = Clock::time_point::max();
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->deadline <= now) {
        expired.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        next = std::min(next, (*it)->deadline);
        ++it;
      }
    }
    for (const auto& batch : in_flight_) {
      for (const auto& item : batch) {
        if (item->delivered.load()) continue;
        if (item->deadline <= now) {
          expired.push_back(item);
        } else {
          next = std::min(next, item->deadline);
        }
      }
    }
    reaper_target_ = next;
    if (!expired.empty()) {
      lk.unlock();
      for (const auto& item : expired) {
        finish(item, {}, batcher_error(EmbedBatcherError::Reason::kDeadline, "embed batcher: deadline exceeded"),
               &expired_);
      }
      lk.lock();
      continue;
    }
    if (next == Clock::time_point::max()) {
      reaper_cv_.wait(lk);
    } else {
      reaper_cv_.wait_until(lk, next);
    }
  }
}

void EmbedBatcher::shutdown() {
  std::deque<ItemPtr> pending;
  {
    std::lock_guard lk(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    pending.swap(queue_);
  }
  work_cv_.notify_all();
  reaper_cv_.notify_all();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  if (reaper_thread_.joinable()) reaper_thread_.join();
  for (const auto& item : pending) {
    finish(item, {}, batcher_error(EmbedBatcherError::Reason::kShutdown, "embed batcher: shut down"), &refused_);
  }
  std::lock_guard lk(mu_);
  workers_.clear();
}

EmbedBatcher::Stats EmbedBatcher::stats() const {
  Stats s;
  s.batches = batches_.load();
  s.texts = texts_.load();
  s.expired = expired_.load();
  s.refused = refused_.load();
  s.failed = failed_.load();
  return s;
}

}  // namespace tidegate::encoder
