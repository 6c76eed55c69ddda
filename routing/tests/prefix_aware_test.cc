// Prefix-aware choice: the index against a plain reference (held set and match by linear
// scan), the bound under a prefix every request shares, and the fallbacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <vector>

#include "tidegate/routing/prefix_aware.h"

namespace tidegate::routing {
namespace {

// Chained block hashes of a prompt made of `doc` (a shared document or conversation) followed
// by `own` blocks of its own: block i's hash depends on every block before it.
std::vector<std::uint64_t> chain(std::uint64_t doc, int doc_blocks, std::uint64_t own, int own_blocks) {
  std::vector<std::uint64_t> out;
  std::uint64_t h = 1469598103934665603ULL;
  for (int i = 0; i < doc_blocks + own_blocks; ++i) {
    h = (h ^ (i < doc_blocks ? doc * 1000 + i : own * 1000003 + i)) * 1099511628211ULL;
    out.push_back(h);
  }
  return out;
}

// Reference LRU: a deque of blocks, most recent first, linear everything.
struct ReferenceLru {
  std::size_t capacity;
  std::deque<std::uint64_t> order;
  void insert(const std::vector<std::uint64_t>& blocks) {
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
      std::erase(order, *it);
      order.push_front(*it);
    }
    while (order.size() > capacity) order.pop_back();
  }
  std::size_t match(const std::vector<std::uint64_t>& blocks) const {
    std::size_t n = 0;
    while (n < blocks.size() && std::find(order.begin(), order.end(), blocks[n]) != order.end()) ++n;
    return n;
  }
};

TEST(PrefixIndex, AgreesWithALinearReferenceUnderEviction) {
  std::mt19937_64 rng(7);
  for (const std::size_t capacity : {0, 1, 5, 40, 300}) {
    PrefixIndex index(capacity);
    ReferenceLru ref{capacity, {}};
    for (int step = 0; step < 2000; ++step) {
      const auto blocks = chain(rng() % 6, static_cast<int>(rng() % 12), rng() % 50, static_cast<int>(rng() % 8));
      ASSERT_EQ(index.match(blocks), ref.match(blocks)) << "capacity " << capacity << " step " << step;
      if (rng() % 3) {
        index.insert(blocks);
        ref.insert(blocks);
      }
      ASSERT_EQ(index.size(), ref.order.size());
    }
  }
}

TEST(PrefixIndex, MatchesLeadingBlocksOnlyAndForgetsOnClear) {
  PrefixIndex index(100);
  const auto a = chain(1, 4, 1, 2);
  index.insert(a);
  EXPECT_EQ(index.match(a), 6u);
  EXPECT_EQ(index.match(chain(1, 4, 2, 3)), 4u);  // same document, another question
  EXPECT_EQ(index.match(chain(2, 4, 1, 2)), 0u);  // another document: chained, nothing matches
  EXPECT_EQ(index.match({}), 0u);
  index.clear();
  EXPECT_EQ(index.match(a), 0u);
  EXPECT_EQ(PrefixIndex::capacity_for(400000, 16), 25000u);
  EXPECT_EQ(PrefixIndex::capacity_for(400000, 512), 781u);
  EXPECT_EQ(PrefixIndex::capacity_for(0, 16), 0u);
}

TEST(PrefixAware, LongestMatchWithinTheBoundWins) {
  const PrefixAwareConfig cfg;
  std::vector<Candidate> c = {{2, 1, 0}, {2, 1, 5}, {1, 1, 3}};
  auto ch = choose_prefix_aware(cfg, c, 1);
  EXPECT_EQ(ch.index, 1);
  EXPECT_EQ(ch.matched_blocks, 5u);
  EXPECT_EQ(ch.reason, ChoiceReason::kPrefix);
  // Equal matches: the less loaded.
  c = {{3, 1, 4}, {1, 1, 4}, {0, 1, 0}};
  EXPECT_EQ(choose_prefix_aware(cfg, c, 1).index, 1);
  // The longest match is over its bound (load 6 of 7 in all, bound ceil(1.25 * 8 / 3) = 4):
  // the longest within it, reported as bounded.
  c = {{6, 1, 9}, {1, 1, 2}, {0, 1, 0}};
  ch = choose_prefix_aware(cfg, c, 1);
  EXPECT_EQ(ch.index, 1);
  EXPECT_EQ(ch.reason, ChoiceReason::kBounded);
  // Only the over-bound replica matches: least loaded of two, still reported as bounded.
  c = {{6, 1, 9}, {1, 1, 0}, {0, 1, 0}};
  ch = choose_prefix_aware(cfg, c, 3);
  EXPECT_NE(ch.index, 0);
  EXPECT_EQ(ch.reason, ChoiceReason::kBounded);
}

TEST(PrefixAware, NoMatchFallsBackToLeastLoadedOfTwo) {
  const PrefixAwareConfig cfg;
  const std::vector<Candidate> c = {{5, 1, 0}, {0, 1, 0}};
  for (std::uint64_t r = 0; r < 50; ++r) {
    const auto ch = choose_prefix_aware(cfg, c, r);
    EXPECT_EQ(ch.index, 1);  // of two, the pair is always both
    EXPECT_EQ(ch.reason, ChoiceReason::kLeastLoaded);
  }
  // Short matches below min_match_blocks do not count.
  PrefixAwareConfig strict;
  strict.min_match_blocks = 3;
  const std::vector<Candidate> d = {{5, 1, 2}, {0, 1, 0}};
  EXPECT_EQ(choose_prefix_aware(strict, d, 9).index, 1);
  EXPECT_EQ(choose_prefix_aware(strict, std::vector<Candidate>{}, 9).index, -1);
  // The same inputs and random number give the same choice; different ones spread.
  const std::vector<Candidate> even(8);
  std::vector<int> hits(8);
  for (std::uint64_t r = 0; r < 800; ++r) {
    const int i = least_loaded_of_two(even, r);
    EXPECT_EQ(i, least_loaded_of_two(even, r));
    ++hits[i];
  }
  for (int h : hits) EXPECT_GT(h, 50);
}

TEST(PrefixAware, OnePrefixSharedByEveryRequestIsSpreadWithinTheBound) {
  // 600 requests, all with the same document, onto 4 replicas with indexes; each stays
  // in flight for 40 arrivals. Without the bound every request would go to the first replica
  // that held the document.
  for (const double bound : {1.1, 1.25, 2.0}) {
    PrefixAwareConfig cfg;
    cfg.load_bound = bound;
    std::vector<PrefixIndex> indexes(4, PrefixIndex(1000));
    std::vector<Candidate> c(4);
    std::deque<int> in_flight;
    std::mt19937_64 rng(11);
    int prefix_choices = 0;
    for (int i = 0; i < 600; ++i) {
      const auto blocks = chain(42, 8, i, 2);
      for (std::size_t k = 0; k < c.size(); ++k) c[k].matched_blocks = indexes[k].match(blocks);
      const auto ch = choose_prefix_aware(cfg, c, rng());
      ASSERT_GE(ch.index, 0);
      prefix_choices += ch.reason == ChoiceReason::kPrefix;
      int total = 1;
      for (const auto& x : c) total += x.outstanding;
      // The bound, checked from outside: the chosen replica's load after this request.
      EXPECT_LE(c[ch.index].outstanding + 1, std::max<double>(cfg.min_bound, std::ceil(bound * total / 4.0)))
          << "bound " << bound << " request " << i;
      ++c[ch.index].outstanding;
      indexes[ch.index].insert(blocks);
      in_flight.push_back(ch.index);
      if (in_flight.size() > 40) {
        --c[in_flight.front()].outstanding;
        in_flight.pop_front();
      }
    }
    // Once every replica holds the document, the matches tie and load decides: most choices
    // are still prefix hits (8 of 10 blocks), spread over all four.
    EXPECT_GT(prefix_choices, 500) << bound;
    if (bound < 1.5) {
      for (const auto& x : c) EXPECT_GT(x.outstanding, 0) << bound;  // (at 2x, two replicas may carry it all)
    }
  }
}

}  // namespace
}  // namespace tidegate::routing
