// The pool with balancer: prefix_aware and session affinity: conversations stay where their
// prefix is, one shared prefix is spread within the bound, ejection and removal forget, queued
// requests are routed by their own hint, SIGHUP to another balancer drops the indexes.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "replica_pool.h"
#include "tidegate/routing/prompt_blocks.h"

using namespace tidegate::gateway;

namespace {

ModelConfig prefix_model(int replicas, int cap = 64) {
  ModelConfig m;
  m.name = "m";
  m.balancer = BalancerKind::kPrefixAware;
  m.max_concurrency_per_replica = cap;
  m.queue.max_length = 100;
  m.health.failures_to_eject = 1;
  m.health.interval_s = 5;
  for (int i = 0; i < replicas; ++i)
    m.replicas.push_back({"r" + std::to_string(i), "127.0.0.1", static_cast<std::uint16_t>(1000 + i), 1.0, "", ""});
  return m;
}

std::shared_ptr<RouteHint> hint_for(const std::string& prompt, std::uint64_t session = 0) {
  auto h = std::make_shared<RouteHint>();
  tidegate::routing::prompt_blocks(prompt, {128, 1 << 20}, h->blocks);
  h->session = session;
  return h;
}

std::string conversation(int c, int turns) {
  std::string s = "[{\"role\":\"system\",\"content\":\"conversation " + std::to_string(c) + std::string(200, 's') + "\"}";
  for (int t = 0; t < turns; ++t) s += ",{\"role\":\"user\",\"content\":\"" + std::string(300, static_cast<char>('a' + t)) + "\"}";
  return s + "]";
}

ReplicaPtr take(ReplicaPool& pool, const std::shared_ptr<RouteHint>& h) {
  auto got = pool.acquire([](ReplicaPtr) {}, h);
  EXPECT_EQ(got.status, ReplicaPool::Status::kGranted);
  return got.replica;
}

}  // namespace

TEST(PrefixRouting, AConversationsTurnsStayOnOneReplica) {
  auto pool = std::make_shared<ReplicaPool>(prefix_model(4), 7);
  // 12 conversations, 5 turns each, answered before the next turn (light load).
  std::map<int, std::string> home;
  int prefix_hits = 0;
  for (int turn = 1; turn <= 5; ++turn)
    for (int c = 0; c < 12; ++c) {
      auto h = hint_for(conversation(c, turn));
      auto r = take(*pool, h);
      ASSERT_TRUE(r);
      if (turn == 1) {
        home[c] = r->id;
        EXPECT_NE(h->reason, "affinity");
      } else {
        EXPECT_EQ(r->id, home[c]) << "conversation " << c << " turn " << turn;
        EXPECT_EQ(h->reason, "prefix");
        EXPECT_GT(h->matched_blocks, 0u);
        ++prefix_hits;
      }
      pool->release(r, Outcome::kSuccess);
    }
  EXPECT_EQ(prefix_hits, 48);
  // The first turns spread (least loaded of two, nothing matched yet).
  std::map<std::string, int> per_replica;
  for (const auto& [c, id] : home) ++per_replica[id];
  EXPECT_GE(per_replica.size(), 3u);
}

TEST(PrefixRouting, OneSharedPrefixIsSpreadWithinTheBound) {
  auto cfg = prefix_model(4);
  cfg.prefix.load_bound = 1.25;
  auto pool = std::make_shared<ReplicaPool>(cfg, 3);
  std::vector<ReplicaPtr> held;
  for (int i = 0; i < 40; ++i) held.push_back(take(*pool, hint_for(conversation(0, 3))));  // all identical
  std::map<std::string, int> load;
  for (const auto& r : held) ++load[r->id];
  ASSERT_EQ(load.size(), 4u);
  for (const auto& [id, n] : load) EXPECT_LE(n, 13) << id;  // ceil(1.25 x 40 / 4)
  for (auto& r : held) pool->release(r, Outcome::kSuccess);
}

TEST(PrefixRouting, EjectionAndRemovalForgetAndReloadToAnotherBalancerDropsIndexes) {
  auto pool = std::make_shared<ReplicaPool>(prefix_model(2), 5);
  auto h = hint_for(conversation(1, 2));
  auto r = take(*pool, h);
  pool->release(r, Outcome::kSuccess);
  auto again = hint_for(conversation(1, 3));
  pool->release(take(*pool, again), Outcome::kSuccess);
  EXPECT_EQ(again->reason, "prefix");
  // Ejected (a restart empties its cache): the next turn matches nothing anywhere.
  pool->report_probe(r->id, false);
  pool->report_probe(r->id, true);
  auto after = hint_for(conversation(1, 4));
  pool->release(take(*pool, after), Outcome::kSuccess);
  EXPECT_EQ(after->matched_blocks, 0u);
  EXPECT_EQ(after->reason, "least_loaded");
  // SIGHUP to least_outstanding: hints get no prefix reason, the indexes are dropped; back to
  // prefix_aware, nothing is remembered from before.
  auto lo = prefix_model(2);
  lo.balancer = BalancerKind::kLeastOutstandingP2C;
  pool->update_config(lo);
  auto plain = hint_for(conversation(1, 5));
  pool->release(take(*pool, plain), Outcome::kSuccess);
  EXPECT_TRUE(plain->reason.empty());
  pool->update_config(prefix_model(2));
  auto fresh = hint_for(conversation(1, 5));
  pool->release(take(*pool, fresh), Outcome::kSuccess);
  EXPECT_EQ(fresh->matched_blocks, 0u);
}

TEST(PrefixRouting, SessionAffinityPinsWhileWithinTheBound) {
  auto cfg = prefix_model(3);
  cfg.balancer = BalancerKind::kLeastOutstandingP2C;  // affinity works with any balancer
  cfg.affinity.header = "x-session-id";
  cfg.affinity.max_sessions = 2;
  auto pool = std::make_shared<ReplicaPool>(cfg, 11);
  auto first = take(*pool, hint_for("", 42));
  pool->release(first, Outcome::kSuccess);
  for (int i = 0; i < 10; ++i) {
    auto h = hint_for("", 42);
    auto r = take(*pool, h);
    EXPECT_EQ(r->id, first->id);
    EXPECT_EQ(h->reason, "affinity");
    pool->release(r, Outcome::kSuccess);
  }
  // Over its bound: up to two in flight a replica is never over it (routing's min_bound); a
  // third would exceed ceil(1.25 x 3 / 3) = 2, so it goes elsewhere and the session is pinned
  // there; the fourth (bound ceil(1.25 x 4 / 3) = 2) follows it.
  std::vector<ReplicaPtr> busy;
  std::vector<std::shared_ptr<RouteHint>> hints;
  for (int i = 0; i < 4; ++i) {
    hints.push_back(hint_for("", 42));
    busy.push_back(take(*pool, hints.back()));
  }
  EXPECT_EQ(busy[0]->id, first->id);
  EXPECT_EQ(busy[1]->id, first->id);
  EXPECT_EQ(hints[1]->reason, "affinity");
  EXPECT_NE(busy[2]->id, first->id);
  EXPECT_NE(hints[2]->reason, "affinity");
  EXPECT_EQ(busy[3]->id, busy[2]->id);
  EXPECT_EQ(hints[3]->reason, "affinity");
  for (auto& b : busy) pool->release(b, Outcome::kSuccess);
  // Bounded memory: two other sessions push session 42 out.
  pool->release(take(*pool, hint_for("", 7)), Outcome::kSuccess);
  pool->release(take(*pool, hint_for("", 8)), Outcome::kSuccess);
  auto forgotten = hint_for("", 42);
  pool->release(take(*pool, forgotten), Outcome::kSuccess);
  EXPECT_TRUE(forgotten->reason.empty());
}

TEST(PrefixRouting, QueuedRequestsAreRoutedByTheirOwnPrompt) {
  auto pool = std::make_shared<ReplicaPool>(prefix_model(2, 1), 9);  // one slot each
  auto a = take(*pool, hint_for(conversation(5, 1)));
  auto b = take(*pool, hint_for(conversation(6, 1)));
  ASSERT_NE(a->id, b->id);
  ReplicaPtr granted;
  auto h = hint_for(conversation(6, 2));
  auto got = pool->acquire([&](ReplicaPtr r) { granted = std::move(r); }, h);
  ASSERT_EQ(got.status, ReplicaPool::Status::kQueued);
  // Conversation 6 lives on b; a frees first, but the head of the queue goes where a slot is,
  // and the choice is recorded for its access log.
  pool->release(a, Outcome::kSuccess);
  ASSERT_TRUE(granted);
  EXPECT_EQ(granted->id, a->id);
  EXPECT_FALSE(h->reason.empty());
  pool->release(granted, Outcome::kSuccess);
  pool->release(b, Outcome::kSuccess);
}

// Issue 22: what one gateway's pool placed (the hint's new_blocks / new_pin say when there is
// anything to tell) is learnt by another gateway's pool, which then routes the conversation's
// next turn, and the session, where the first one sent them; a pool that learnt nothing cannot.
TEST(PrefixRouting, PlacementsLearntFromAnotherGatewayRouteLikeItsOwn) {
  auto cfg = prefix_model(4);
  cfg.affinity.header = "x-session-id";
  cfg.affinity.max_sessions = 100;
  auto here = std::make_shared<ReplicaPool>(cfg, 3);
  auto there = std::make_shared<ReplicaPool>(cfg, 5);
  auto alone = std::make_shared<ReplicaPool>(cfg, 5);
  std::map<int, std::string> home;
  for (int c = 0; c < 8; ++c) {
    auto h = hint_for(conversation(c, 1), 1000 + c);
    auto r = take(*here, h);
    EXPECT_TRUE(h->new_blocks);
    EXPECT_TRUE(h->new_pin);
    home[c] = r->id;
    EXPECT_TRUE(there->learn(r->id, h->blocks, h->session));
    here->release(r, Outcome::kSuccess);
    // The same again teaches nothing: the whole prompt matched, the session was already here.
    auto again = hint_for(conversation(c, 1), 1000 + c);
    here->release(take(*here, again), Outcome::kSuccess);
    EXPECT_FALSE(again->new_blocks);
    EXPECT_FALSE(again->new_pin);
  }
  int moved_alone = 0;
  for (int c = 0; c < 8; ++c) {
    auto next_turn = hint_for(conversation(c, 2));  // no session: the prefix alone decides
    auto r = take(*there, next_turn);
    EXPECT_EQ(r->id, home[c]) << "conversation " << c;
    EXPECT_EQ(next_turn->reason, "prefix");
    EXPECT_GT(next_turn->matched_blocks, 0u);
    EXPECT_TRUE(next_turn->new_blocks);  // the second turn's blocks are news for the fleet
    there->release(r, Outcome::kSuccess);
    auto by_session = hint_for("", 1000 + c);
    auto s = take(*there, by_session);
    EXPECT_EQ(s->id, home[c]);
    EXPECT_EQ(by_session->reason, "affinity");
    there->release(s, Outcome::kSuccess);
    auto uninformed = hint_for(conversation(c, 2));
    auto u = take(*alone, uninformed);
    EXPECT_NE(uninformed->reason, "prefix");
    moved_alone += u->id != home[c];
    alone->release(u, Outcome::kSuccess);
  }
  EXPECT_GT(moved_alone, 0);  // without the placements, turns scatter
  // Unknown or ejected replicas learn nothing.
  const auto h = hint_for(conversation(9, 1), 77);
  EXPECT_FALSE(there->learn("nope", h->blocks, h->session));
  there->report_probe("r1", false);
  EXPECT_FALSE(there->learn("r1", h->blocks, h->session));
}
