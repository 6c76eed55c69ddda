#include "tidegate/encoder/embed_batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>

#include "tidegate/encoder/hash_embedder.h"

namespace tidegate::encoder {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The real hash embedder behind a gate the test opens, so "the worker is busy" is a fact the
// test controls rather than a sleep it hopes is long enough. Records each call's batch size.
class GatedEmbedder final : public Embedder {
 public:
  explicit GatedEmbedder(bool open) : inner_(make_hash_embedder()), open_(open) {}
  std::size_t dim() const override { return inner_->dim(); }
  std::string name() const override { return "gated-hash"; }
  std::vector<float> embed(const std::vector<std::string>& texts, Clock::time_point deadline) override {
    {
      std::unique_lock lk(mu_);
      sizes_.push_back(texts.size());
      changed_.notify_all();
      changed_.wait_for(lk, 20s, [&] { return open_; });  // bounded: a broken test cannot hang
    }
    if (fail_.load()) throw std::runtime_error("backend down");
    auto out = inner_->embed(texts, deadline);
    ++returned_;
    return out;
  }
  void open() {
    std::lock_guard lk(mu_);
    open_ = true;
    changed_.notify_all();
  }
  void wait_for_calls(std::size_t n) {
    std::unique_lock lk(mu_);
    changed_.wait_for(lk, 20s, [&] { return sizes_.size() >= n; });
  }
  std::vector<std::size_t> sizes() {
    std::lock_guard lk(mu_);
    return sizes_;
  }
  std::atomic<bool> fail_{false};
  std::atomic<int> returned_{0};

 private:
  std::unique_ptr<Embedder> inner_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool open_;
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
  auto gated = std::make_shared<GatedEmbedder>(false);
  auto reference = make_hash_embedder();
  EmbedBatcherOptions options;
  options.threads = 1;
  options.max_batch = 16;
  EmbedBatcher batcher(gated, options);
  constexpr int kThreads = 4, kPerThread = 10;
  std::latch submitted(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<std::string, std::future<std::vector<float>>>> futures;
      for (int i = 0; i < kPerThread; ++i) {
        std::string text = "thread " + std::to_string(t) + " text " + std::to_string(i);
        futures.emplace_back(text, batcher.submit(text, Clock::now() + 30s));
      }
      submitted.count_down();
      for (auto& [text, f] : futures) {
        if (f.get() != reference->embed({text}, Clock::now() + 1s)) ++mismatches;
      }
    });
  }
  submitted.wait();  // everything is queued behind the first (blocked) call
  gated->open();
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  const auto sizes = gated->sizes();
  std::size_t total = 0;
  for (auto s : sizes) {
    total += s;
    EXPECT_LE(s, 16u);
  }
  EXPECT_EQ(total, std::size_t{kThreads * kPerThread});
  EXPECT_LE(sizes.size(), 4u);  // 1 call blocked at the gate, then 39 texts in batches of <= 16
  EXPECT_EQ(batcher.stats().texts, total);
  EXPECT_EQ(batcher.stats().batches, sizes.size());
}

TEST(EmbedBatcher, DeadlineWhileEmbedderIsStuckIsAnErrorNotAHang) {
  auto gated = std::make_shared<GatedEmbedder>(false);
  EmbedBatcher batcher(gated, EmbedBatcherOptions{});
  const auto start = Clock::now();
  auto running = batcher.submit("in flight", start + 100ms);
  auto queued = batcher.submit("queued behind it", start + 150ms);
  EXPECT_EQ(reason_of(running), EmbedBatcherError::Reason::kDeadline);
  EXPECT_EQ(reason_of(queued), EmbedBatcherError::Reason::kDeadline);
  EXPECT_EQ(gated->returned_.load(), 0);  // both answered while the embedder was still stuck
  auto late = batcher.submit("already late", Clock::now() - 1ms);
  EXPECT_EQ(reason_of(late), EmbedBatcherError::Reason::kDeadline);
  gated->open();
  EXPECT_GE(batcher.stats().expired, 2u);
}

TEST(EmbedBatcher, ShutdownFailsPendingAndRefusesNewWork) {
  auto gated = std::make_shared<GatedEmbedder>(false);
  EmbedBatcher batcher(gated, EmbedBatcherOptions{});
  auto first = batcher.submit("first", Clock::now() + 30s);
  gated->wait_for_calls(1);  // the worker is inside embed() with it
  std::vector<std::future<std::vector<float>>> pending;
  for (const char* text : {"p0", "p1", "p2", "p3", "p4"}) pending.push_back(batcher.submit(text, Clock::now() + 30s));
  std::thread stopper([&] { batcher.shutdown(); });
  // shutdown() refuses new work before it waits for the busy worker; probe until it does.
  for (;;) {
    auto probe = batcher.submit("probe", Clock::now() + 30s);
    if (probe.wait_for(0s) == std::future_status::ready) {
      EXPECT_EQ(reason_of(probe), EmbedBatcherError::Reason::kShutdown);
      break;
    }
    pending.push_back(std::move(probe));  // queued before the stop: must fail with kShutdown too
    std::this_thread::sleep_for(1ms);
  }
  gated->open();
  stopper.join();
  EXPECT_EQ(first.get().size(), 384u);  // the running batch completes normally
  for (auto& f : pending) EXPECT_EQ(reason_of(f), EmbedBatcherError::Reason::kShutdown);
  batcher.shutdown();  // idempotent
}

TEST(EmbedBatcher, EmbedderErrorsReachEveryCallerOfTheBatch) {
  auto gated = std::make_shared<GatedEmbedder>(true);
  gated->fail_ = true;
  EmbedBatcher batcher(gated, EmbedBatcherOptions{});
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
  auto gated = std::make_shared<GatedEmbedder>(false);
  EmbedBatcherOptions options;
  options.max_queue = 2;
  EmbedBatcher batcher(gated, options);
  auto busy = batcher.submit("busy", Clock::now() + 30s);
  gated->wait_for_calls(1);
  auto a = batcher.submit("a", Clock::now() + 30s);
  auto b = batcher.submit("b", Clock::now() + 30s);
  auto c = batcher.submit("c", Clock::now() + 30s);
  EXPECT_EQ(reason_of(c), EmbedBatcherError::Reason::kOverloaded);
  gated->open();
  EXPECT_EQ(a.get().size(), 384u);
  EXPECT_EQ(b.get().size(), 384u);
  EXPECT_EQ(busy.get().size(), 384u);
  EXPECT_THROW(EmbedBatcher(nullptr, EmbedBatcherOptions{}), std::invalid_argument);
}

}  // namespace
}  // namespace tidegate::encoder
