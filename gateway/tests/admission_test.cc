#include <gtest/gtest.h>

#include "admission_queue.h"
#include "replica_pool.h"

using namespace tidegate::gateway;

TEST(AdmissionQueue, FifoBoundedAndRemovable) {
  AdmissionQueue<int> q(3);
  const auto t0 = Clock::now();
  auto a = q.push(1, t0), b = q.push(2, t0), c = q.push(3, t0);
  ASSERT_TRUE(a && b && c);
  EXPECT_FALSE(q.push(4, t0));  // full
  EXPECT_TRUE(q.remove(*b, t0));
  EXPECT_FALSE(q.remove(*b, t0));  // already gone
  EXPECT_EQ(*q.pop(t0), 1);
  EXPECT_EQ(*q.pop(t0), 3);
  EXPECT_FALSE(q.pop(t0));
}

TEST(AdmissionQueue, WaitSignals) {
  AdmissionQueue<int> q(10);
  const auto t0 = Clock::now();
  q.push(1, t0);
  q.push(2, t0 + std::chrono::seconds(1));
  EXPECT_NEAR(q.oldest_wait_s(t0 + std::chrono::seconds(3)), 3.0, 1e-6);
  q.pop(t0 + std::chrono::seconds(2));  // waited 2 s
  q.pop(t0 + std::chrono::seconds(2));  // waited 1 s
  EXPECT_NEAR(q.recent_wait_quantile(1.0), 2.0, 1e-6);
  EXPECT_NEAR(q.recent_wait_quantile(0.0), 1.0, 1e-6);
}

namespace {
ModelConfig model(int replicas, int cap, std::size_t queue_len) {
  ModelConfig m;
  m.name = "m";
  m.max_concurrency_per_replica = cap;
  m.queue.max_length = queue_len;
  m.health.failures_to_eject = 2;
  for (int i = 0; i < replicas; ++i) m.replicas.push_back({"r" + std::to_string(i), "127.0.0.1", static_cast<std::uint16_t>(1000 + i), 1.0, "", ""});
  return m;
}
}  // namespace

TEST(ReplicaPool, CapQueueAndGrantOnRelease) {
  auto pool = std::make_shared<ReplicaPool>(model(1, 2, 1), 42);
  auto a = pool->acquire(nullptr), b = pool->acquire(nullptr);
  ASSERT_EQ(a.status, ReplicaPool::Status::kGranted);
  ASSERT_EQ(b.status, ReplicaPool::Status::kGranted);
  ReplicaPtr granted;
  auto c = pool->acquire([&](ReplicaPtr r) { granted = r; });
  EXPECT_EQ(c.status, ReplicaPool::Status::kQueued);
  EXPECT_EQ(pool->acquire(nullptr).status, ReplicaPool::Status::kQueueFull);
  EXPECT_EQ(pool->sample().queue_depth, 1u);
  pool->release(a.replica, Outcome::kSuccess);
  ASSERT_TRUE(granted);  // the freed slot went to the waiter
  EXPECT_EQ(pool->sample().in_flight, 2u);
  EXPECT_FALSE(pool->cancel(c.ticket));
}

TEST(ReplicaPool, PassiveEjectionAndProbeReadmission) {
  auto pool = std::make_shared<ReplicaPool>(model(1, 10, 10), 1);
  for (int i = 0; i < 2; ++i) pool->release(pool->acquire(nullptr).replica, Outcome::kFailure);
  EXPECT_EQ(pool->acquire(nullptr).status, ReplicaPool::Status::kNoReplica);
  EXPECT_FALSE(pool->ready());
  pool->report_probe("r0", true);
  EXPECT_TRUE(pool->ready());
  EXPECT_EQ(pool->acquire(nullptr).status, ReplicaPool::Status::kGranted);
}

TEST(ReplicaPool, DrainWaitsForInFlightThenRemove) {
  auto pool = std::make_shared<ReplicaPool>(model(2, 10, 10), 3);
  std::vector<ReplicaPtr> held;
  for (int i = 0; i < 4; ++i) held.push_back(pool->acquire(nullptr).replica);
  bool drained = false;
  pool->drain("r0", [&] { drained = true; });
  for (int i = 0; i < 20; ++i) {  // no new work goes to a draining replica
    auto r = pool->try_acquire({});
    ASSERT_EQ(r->id, "r1");
    pool->release(r, Outcome::kSuccess);
  }
  for (auto& r : held) {
    if (r->id == "r0") {
      EXPECT_FALSE(drained);
    }
    pool->release(r, Outcome::kSuccess);
  }
  EXPECT_TRUE(drained);
  pool->remove("r0");
  EXPECT_EQ(pool->replicas().size(), 1u);
}

TEST(ReplicaPool, ConfigReloadKeepsScalerReplicas) {
  auto pool = std::make_shared<ReplicaPool>(model(2, 10, 10), 3);
  pool->add({"scaled", "127.0.0.1", 2000, 1.0, "", ""}, false);
  pool->update_config(model(1, 10, 10));  // r1 leaves the config
  std::set<std::string> ids;
  for (const auto& r : pool->replicas()) ids.insert(r->id);
  EXPECT_EQ(ids, (std::set<std::string>{"r0", "scaled"}));
}
