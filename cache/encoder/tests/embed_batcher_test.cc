#include "tidegate/cache/embed_batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>

#include "tidegate/cache/hash_embedder.h"

namespace tidegate::cache {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The real hash embedder, with each call held for `delay` and the batch sizes recorded, so
// the tests can see the batching and make the worker busy on purpose.
class SlowEmbedder final : public Embedder {
 public:
  explicit SlowEmbedder(std::chrono::milliseconds delay) : inner_(make_hash_embedder()), delay_(delay) {}
  std::size_t dim() const override { return inner_->dim(); }
  std::string name() const override { return "slow-hash"; }
  std::vector<float> embed(const std::vector<std::string>& texts, Clock::time_point deadline) override {
    {
      std::lock_guard lk(mu_);
      sizes_.push_back(texts.size());
    }
    std::this_thread::sleep_for(delay_);
    if (fail_.load()) throw std::runtime_error("backend down");
    return inner_->embed(texts, deadline);
  }
  std::vector<std::size_t> sizes() {
    std::lock_guard lk(mu_);
    return sizes_;
  }
  std::atomic<bool> fail_{false};

 private:
  std::unique_ptr<Embedder> inner_;
  std::chrono::milliseconds delay_;
  std::mutex mu_;
  std::vector<std::size_t> sizes_;
};

EmbedBatcherError::Reason reason_of(std::future<std::vector<float>>& f) {
  try {
    f.get();
  } catch (const EmbedBatcherError& e) {
    return e.reason();
  }
  ADD_FAILURE() << "no EmbedBatcherError";
  return EmbedBatcherError::Reason::kOverloaded;
}

TEST(EmbedBatcher, ConcurrentSubmitsGetTheirOwnVectorsInFewerCalls) {
  auto slow = std::make_shared<SlowEmbedder>(30ms);
  auto reference = make_hash_embedder();
  EmbedBatcherOptions options;
  options.threads = 1;
  options.max_batch = 16;
  EmbedBatcher batcher(slow, options);
  constexpr int kThreads = 4, kPerThread = 10;
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<std::string, std::future<std::vector<float>>>> futures;
      for (int i = 0; i < kPerThread; ++i) {
        std::string text = "thread " + std::to_string(t) + " text " + std::to_string(i);
        futures.emplace_back(text, batcher.submit(text, Clock::now() + 20s));
      }
      for (auto& [text, f] : futures) {
        if (f.get() != reference->embed({text}, Clock::now() + 1s)) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  const auto sizes = slow->sizes();
  std::size_t total = 0;
  for (auto s : sizes) {
    total += s;
    EXPECT_LE(s, 16u);
  }
  EXPECT_EQ(total, std::size_t{kThreads * kPerThread});
  EXPECT_LT(sizes.size(), std::size_t{kThreads * kPerThread});  // texts queued behind a busy worker share calls
  EXPECT_EQ(batcher.stats().texts, total);
}

TEST(EmbedBatcher, DeadlineWhileEmbedderIsStuckIsAnErrorNotAHang) {
  auto slow = std::make_shared<SlowEmbedder>(2000ms);
  EmbedBatcher batcher(slow, EmbedBatcherOptions{});
  const auto start = Clock::now();
  auto running = batcher.submit("in flight", start + 100ms);
  auto queued = batcher.submit("queued behind it", start + 150ms);
  EXPECT_EQ(reason_of(running), EmbedBatcherError::Reason::kDeadline);
  EXPECT_EQ(reason_of(queued), EmbedBatcherError::Reason::kDeadline);
  EXPECT_LT(Clock::now() - start, 1500ms);  // bounded by the deadlines, not the 2 s embed
  auto late = batcher.submit("already late", Clock::now() - 1ms);
  EXPECT_EQ(reason_of(late), EmbedBatcherError::Reason::kDeadline);
  EXPECT_GE(batcher.stats().expired, 2u);
}

TEST(EmbedBatcher, ShutdownFailsPendingAndRefusesNewWork) {
  auto slow = std::make_shared<SlowEmbedder>(200ms);
  auto batcher = std::make_unique<EmbedBatcher>(slow, EmbedBatcherOptions{});
  auto first = batcher->submit("first", Clock::now() + 10s);
  while (slow->sizes().empty()) std::this_thread::sleep_for(1ms);  // the worker is busy with it
  std::vector<std::future<std::vector<float>>> pending;
  for (const char* text : {"p0", "p1", "p2", "p3", "p4"}) pending.push_back(batcher->submit(text, Clock::now() + 10s));
  batcher->shutdown();
  EXPECT_EQ(first.get().size(), 384u);  // the running batch completes normally
  for (auto& f : pending) EXPECT_EQ(reason_of(f), EmbedBatcherError::Reason::kShutdown);
  auto after = batcher->submit("after", Clock::now() + 10s);
  EXPECT_EQ(reason_of(after), EmbedBatcherError::Reason::kShutdown);
  batcher.reset();  // second shutdown in the destructor is a no-op
}

TEST(EmbedBatcher, EmbedderErrorsReachEveryCallerOfTheBatch) {
  auto slow = std::make_shared<SlowEmbedder>(0ms);
  slow->fail_ = true;
  EmbedBatcher batcher(slow, EmbedBatcherOptions{});
  std::latch done(3);
  std::atomic<int> errors{0};
  for (int i = 0; i < 3; ++i) {
    batcher.submit("x", Clock::now() + 5s, [&](std::vector<float> v, std::exception_ptr e) {
      if (e && v.empty()) ++errors;
      done.count_down();
    });
  }
  done.wait();
  EXPECT_EQ(errors.load(), 3);
  EXPECT_EQ(batcher.stats().failed, 3u);
}

TEST(EmbedBatcher, FullQueueRefusesAtOnce) {
  auto slow = std::make_shared<SlowEmbedder>(300ms);
  EmbedBatcherOptions options;
  options.max_queue = 2;
  EmbedBatcher batcher(slow, options);
  auto busy = batcher.submit("busy", Clock::now() + 10s);
  while (slow->sizes().empty()) std::this_thread::sleep_for(1ms);
  auto a = batcher.submit("a", Clock::now() + 10s);
  auto b = batcher.submit("b", Clock::now() + 10s);
  auto c = batcher.submit("c", Clock::now() + 10s);
  EXPECT_EQ(reason_of(c), EmbedBatcherError::Reason::kOverloaded);
  EXPECT_EQ(a.get().size(), 384u);
  EXPECT_EQ(b.get().size(), 384u);
  EXPECT_THROW(EmbedBatcher(nullptr, EmbedBatcherOptions{}), std::invalid_argument);
}

}  // namespace
}  // namespace tidegate::cache
