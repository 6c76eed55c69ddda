// Chunked prefill and prefix caching in the timing model: hand-computed cases, and a
// differential test against a plain step-by-step reference written for clarity, not speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>

#include "tidegate/sim/timing_model.h"

namespace tidegate::sim {
namespace {

TimingParams plain() {
  TimingParams p;
  p.max_batch = 8;
  p.prefill_tokens_per_s = 1000;  // 1 ms per prompt token
  p.decode_base_s = 0.010;
  p.decode_per_seq_s = 0.001;
  p.decode_per_kv_token_s = 0;
  p.prefill_attention_context_tokens = 0;
  p.kv_capacity_tokens = 100000;
  p.max_num_batched_tokens = 64;
  p.prefix_block_tokens = 10;
  p.emit_token_events = false;
  return p;
}

double time_of(const std::vector<Event>& ev, RequestId id, EventKind kind) {
  for (const auto& e : ev)
    if (e.id == id && e.kind == kind) return e.t;
  return -1;
}

TEST(ChunkedPrefill, LongPromptIsSplitIntoBudgetedSteps) {
  TimingModel m(plain());
  m.submit(1, 150, 1, 0.0);  // chunks of 64, 64, 22 tokens
  const auto ev = m.advance(10.0);
  EXPECT_NEAR(time_of(ev, 1, EventKind::kFirstToken), 3 * 0.010 + 0.150, 1e-12);
}

TEST(ChunkedPrefill, DecodingSequencesShareTheBudgetAndKeepStreaming) {
  TimingParams p = plain();
  p.emit_token_events = true;
  TimingModel m(p);
  m.submit(1, 5, 50, 0.0);  // streaming: one token per step
  m.advance(0.05);
  m.submit(2, 640, 1, 0.05);  // a long prompt: 640 / 63 tokens a step
  const auto ev = m.advance(100.0);
  // While request 2 prefills, request 1 still gets a token every step, each step at most
  // base + one sequence + a 63-token chunk.
  double last = -1, worst_gap = 0;
  for (const auto& e : ev)
    if (e.id == 1 && (e.kind == EventKind::kToken || e.kind == EventKind::kFirstToken)) {
      if (last >= 0) worst_gap = std::max(worst_gap, e.t - last);
      last = e.t;
    }
  EXPECT_LE(worst_gap, 0.010 + 0.001 + 0.063 + 1e-9);
  // Without a budget the same prompt is one 0.64 s step that stalls the stream.
  TimingParams whole = p;
  whole.max_num_batched_tokens = 0;
  TimingModel w(whole);
  w.submit(1, 5, 50, 0.0);
  w.advance(0.05);
  w.submit(2, 640, 1, 0.05);
  last = -1;
  double whole_gap = 0;
  for (const auto& e : w.advance(100.0))
    if (e.id == 1 && e.kind != EventKind::kFinished) {
      if (last >= 0) whole_gap = std::max(whole_gap, e.t - last);
      last = e.t;
    }
  EXPECT_GT(whole_gap, 0.64);
}

TEST(ChunkedPrefill, AttentionMakesLaterChunksDearer) {
  TimingParams p = plain();
  p.prefill_attention_context_tokens = 1000;
  EXPECT_NEAR(prefill_seconds(p, 100, 0), 0.100 * (1 + 50.0 / 1000), 1e-12);
  EXPECT_NEAR(prefill_seconds(p, 100, 900), 0.100 * (1 + 950.0 / 1000), 1e-12);
  EXPECT_NEAR(step_seconds(p, 3, 2000, 0), 0.010 + 0.003, 1e-12);
  p.decode_per_kv_token_s = 1e-6;
  EXPECT_NEAR(step_seconds(p, 3, 2000, 0), 0.010 + 0.003 + 0.002, 1e-12);
}

std::vector<std::uint64_t> chain(std::uint64_t doc, int blocks) {
  std::vector<std::uint64_t> h;
  for (int i = 0; i < blocks; ++i) h.push_back(doc * 1000 + static_cast<std::uint64_t>(i));
  return h;
}

TEST(PrefixCache, ACachedPrefixIsNotPrefilledAgain) {
  TimingModel m(plain());
  const auto doc = chain(7, 10);  // 100 tokens in 10 blocks
  m.submit(1, 100, 1, 0.0, doc);
  auto ev = m.advance(10.0);
  const double cold = time_of(ev, 1, EventKind::kFirstToken);
  EXPECT_NEAR(cold, 2 * 0.010 + 0.100, 1e-12);  // 64 + 36 tokens
  // The same 100-token prefix and 20 new tokens: only the 20 are prefilled.
  auto longer = chain(7, 12);
  m.submit(2, 120, 1, 20.0, longer);
  ev = m.advance(30.0);
  EXPECT_NEAR(time_of(ev, 2, EventKind::kFirstToken) - 20.0, 0.010 + 0.020, 1e-12);
  const auto s = m.prefix_cache_stats();
  EXPECT_EQ(s.queries_tokens, 220);
  EXPECT_EQ(s.hits_tokens, 100);
  EXPECT_EQ(s.resident_tokens, 120);
  EXPECT_EQ(m.gauges().kv_used_tokens, 0);  // cached but unreferenced: free, as vLLM counts it
}

TEST(PrefixCache, AFullHitStillComputesTheLastToken) {
  TimingModel m(plain());
  m.submit(1, 50, 1, 0.0, chain(3, 5));
  m.advance(10.0);
  m.submit(2, 50, 1, 20.0, chain(3, 5));
  const auto ev = m.advance(30.0);
  EXPECT_NEAR(time_of(ev, 2, EventKind::kFirstToken) - 20.0, 0.010 + 0.001, 1e-12);
  EXPECT_EQ(m.prefix_cache_stats().hits_tokens, 49);
}

TEST(PrefixCache, AnExternallyCachedPrefixSkipsPrefillButTakesKvWhileRunning) {
  TimingModel m(plain());
  m.submit_externally_cached(1, 120, 5, 0.0, 100);  // 100 tokens held elsewhere: 20 prefilled
  m.advance(0.0);
  EXPECT_EQ(m.gauges().kv_used_tokens, 120);  // the whole prompt is reserved while it runs
  const auto ev = m.advance(30.0);
  EXPECT_NEAR(time_of(ev, 1, EventKind::kFirstToken), 0.010 + 0.020, 1e-12);
  const auto s = m.prefix_cache_stats();
  EXPECT_EQ(s.queries_tokens, 120);
  EXPECT_EQ(s.hits_tokens, 100);
  EXPECT_EQ(s.resident_tokens, 0);  // nothing is left in this replica's own cache
  // More than the prompt is clamped: the last token is still computed.
  m.submit_externally_cached(2, 50, 1, 40.0, 500);
  m.advance(60.0);
  EXPECT_EQ(m.prefix_cache_stats().hits_tokens, 100 + 49);
}

TEST(PrefixCache, OnlyTheSamePrefixMatches) {
  TimingModel m(plain());
  m.submit(1, 100, 1, 0.0, chain(1, 10));
  m.advance(10.0);
  auto other = chain(1, 10);
  other[0] = 999;  // the first block differs: nothing after it can be reused
  m.submit(2, 100, 1, 20.0, other);
  m.advance(30.0);
  EXPECT_EQ(m.prefix_cache_stats().hits_tokens, 0);
}

TEST(PrefixCache, LeastRecentlyUsedBlocksAreEvictedWhenKvIsNeeded) {
  TimingParams p = plain();
  p.kv_capacity_tokens = 250;
  TimingModel m(p);
  m.submit(1, 100, 1, 0.0, chain(1, 10));
  m.advance(5.0);
  m.submit(2, 100, 1, 10.0, chain(2, 10));
  m.advance(15.0);
  EXPECT_EQ(m.prefix_cache_stats().resident_tokens, 200);
  // 100 more tokens + 1 output: 51 tokens must go, taken from document 1 (older).
  m.submit(3, 100, 1, 20.0, chain(3, 10));
  m.advance(25.0);
  const auto s = m.prefix_cache_stats();
  EXPECT_EQ(s.evicted_tokens, 60);  // whole blocks: 6 of document 1
  m.submit(4, 100, 1, 30.0, chain(2, 10));  // document 2 survived
  m.advance(35.0);
  EXPECT_EQ(m.prefix_cache_stats().hits_tokens, 99);
  // Document 1 lost its last six blocks, not its first ones: its first 40 tokens still hit.
  m.submit(5, 100, 1, 40.0, chain(1, 10));
  m.advance(45.0);
  EXPECT_EQ(m.prefix_cache_stats().hits_tokens, 99 + 40);
}

TEST(PrefixCache, BlocksInUseAreNeverEvicted) {
  TimingParams p = plain();
  p.kv_capacity_tokens = 260;
  TimingModel m(p);
  m.submit(1, 100, 200, 0.0, chain(1, 10));  // long output: holds its blocks for a while
  m.advance(1.0);
  // 100 + 200 reserved by request 1 leaves no room for this one until request 1 ends.
  m.submit(2, 100, 50, 1.0, chain(2, 10));
  EXPECT_EQ(m.gauges().waiting, 1);
  const auto ev = m.advance(100.0);
  EXPECT_GT(time_of(ev, 2, EventKind::kFirstToken), time_of(ev, 1, EventKind::kFinished));
}

TEST(TimingModelCopy, ACopyContinuesIndependently) {
  TimingParams p = plain();
  TimingModel a(p);
  for (RequestId id = 1; id <= 6; ++id) a.submit(id, 40 * id, 5 * static_cast<int>(id), 0.01 * id, chain(id % 2, 4));
  a.advance(0.2);
  TimingModel b(a);
  const auto ea = a.advance(50.0);
  b.submit(100, 30, 3, 0.2);  // only the copy gets this one
  const auto eb = b.advance(50.0);
  EXPECT_LT(ea.size(), eb.size());
  EXPECT_LT(time_of(eb, 100, EventKind::kFinished), 50.0);
  EXPECT_LT(time_of(ea, 100, EventKind::kFinished), 0);
}

// ---- differential test ---------------------------------------------------------------------

struct Arrival {
  RequestId id;
  double t;
  std::int64_t prompt;
  std::int32_t n;
  std::vector<std::uint64_t> blocks;
};

// Every step recomputed from scratch over plain vectors; an LRU by timestamps.
class Reference {
 public:
  explicit Reference(TimingParams p) : p_(p) {}

  std::map<RequestId, std::pair<double, double>> run(const std::vector<Arrival>& arrivals) {
    std::size_t next = 0;
    double t = 0;
    while (next < arrivals.size() || !waiting_.empty() || !running_.empty()) {
      if (running_.empty() && waiting_.empty()) t = std::max(t, arrivals[next].t);
      while (next < arrivals.size() && arrivals[next].t <= t) waiting_.push_back(arrivals[next++]);
      step(t);
    }
    return out_;
  }

 private:
  struct Seq {
    Arrival a;
    std::int64_t computed = 0, emitted = 0, priv = 0;
    std::size_t held = 0;
    bool decoding = false;
    std::int64_t finish_order = 0;  // the model finishes a step's sequences in prefill order
  };
  struct Block {
    int refs = 0;
    std::int64_t tokens = 0, stamp = 0;
  };

  std::int64_t block_tokens(const Arrival& a, std::size_t i) const {
    return std::min<std::int64_t>(p_.prefix_block_tokens, a.prompt - static_cast<std::int64_t>(i) * p_.prefix_block_tokens);
  }
  std::int64_t resident() const {
    std::int64_t s = 0;
    for (const auto& [h, b] : cache_) s += b.tokens;
    return s;
  }
  std::int64_t priv() const {
    std::int64_t s = 0;
    for (const auto& q : running_) s += q.priv;
    return s;
  }
  std::int64_t next_order_ = 0;
  void unpin(std::uint64_t h) {
    if (--cache_[h].refs == 0) cache_[h].stamp = ++clock_;
  }

  void step(double& t) {
    int d = 0;
    std::int64_t context = 0;
    for (const auto& q : running_)
      if (q.decoding) ++d, context += q.a.prompt + q.emitted;
    double fixed = p_.decode_base_s + p_.decode_per_seq_s * d + p_.decode_per_kv_token_s * static_cast<double>(context);
    std::int64_t budget = p_.max_num_batched_tokens - d;
    double prefill = 0;
    std::vector<std::pair<std::size_t, std::int64_t>> chunks;
    for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
      auto& q = running_[i];
      if (q.decoding) continue;
      const auto c = std::min(q.a.prompt - q.computed, budget);
      prefill += prefill_seconds(p_, c, q.computed);
      chunks.emplace_back(i, c);
      budget -= c;
    }
    while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < p_.max_batch) {
      const Arrival& a = waiting_.front();
      std::size_t m = 0;
      std::int64_t mt = 0, pinned_unpinned = 0;
      while (m < a.blocks.size() && cache_.count(a.blocks[m])) {
        mt += block_tokens(a, m);
        if (cache_[a.blocks[m]].refs == 0) pinned_unpinned += cache_[a.blocks[m]].tokens;
        ++m;
      }
      std::int64_t evictable = 0;
      for (const auto& [h, b] : cache_) evictable += b.refs == 0 ? b.tokens : 0;
      const std::int64_t need = a.prompt - mt + a.n;
      if (priv() + need + resident() - (evictable - pinned_unpinned) > p_.kv_capacity_tokens) break;
      for (std::size_t i = 0; i < m; ++i) ++cache_[a.blocks[i]].refs;
      while (resident() > p_.kv_capacity_tokens - priv() - need) {
        auto victim = cache_.end();
        for (auto it = cache_.begin(); it != cache_.end(); ++it)
          if (it->second.refs == 0 && (victim == cache_.end() || it->second.stamp < victim->second.stamp)) victim = it;
        if (victim == cache_.end()) break;
        cache_.erase(victim);
      }
      Seq q{a, std::min(mt, a.prompt - 1), 0, need, m, false};
      running_.push_back(q);
      waiting_.pop_front();
      const auto c = std::min(q.a.prompt - q.computed, budget);
      prefill += prefill_seconds(p_, c, q.computed);
      chunks.emplace_back(running_.size() - 1, c);
      budget -= c;
    }
    t = t + fixed + prefill;
    for (auto& q : running_)
      if (q.decoding) ++q.emitted;
    for (auto [i, c] : chunks) {
      auto& q = running_[i];
      q.computed += c;
      while (q.held < q.a.blocks.size()) {
        const std::int64_t end = std::min<std::int64_t>(static_cast<std::int64_t>(q.held + 1) * p_.prefix_block_tokens, q.a.prompt);
        if (end > q.computed && q.computed < q.a.prompt) break;
        const auto h = q.a.blocks[q.held];
        if (cache_.count(h)) ++cache_[h].refs;
        else cache_[h] = Block{1, block_tokens(q.a, q.held), 0};
        q.priv -= block_tokens(q.a, q.held);
        ++q.held;
      }
      if (q.computed == q.a.prompt) {
        q.decoding = true;
        q.emitted = 1;
        q.finish_order = ++next_order_;
        out_[q.a.id].first = t;
      }
    }
    std::vector<std::pair<std::int64_t, RequestId>> done;
    for (const auto& q : running_)
      if (q.decoding && q.emitted >= q.a.n) done.emplace_back(q.finish_order, q.a.id);
    std::sort(done.begin(), done.end());
    for (const auto& [order, id] : done) {
      auto it = std::find_if(running_.begin(), running_.end(), [&](const Seq& q) { return q.a.id == id; });
      out_[id].second = t;
      for (std::size_t b = it->held; b-- > 0;) unpin(it->a.blocks[b]);  // tail first
      running_.erase(it);
    }
  }

  TimingParams p_;
  std::deque<Arrival> waiting_;
  std::vector<Seq> running_;
  std::map<std::uint64_t, Block> cache_;
  std::int64_t clock_ = 0;
  std::map<RequestId, std::pair<double, double>> out_;
};

TEST(TimingModelDifferential, MatchesTheReferenceOnRandomWorkloads) {
  for (unsigned seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed);
    TimingParams p = plain();
    p.max_batch = 2 + static_cast<int>(seed % 5);
    p.kv_capacity_tokens = 1500 + 400 * (seed % 4);  // tight: waits and evictions happen
    p.max_num_batched_tokens = 32 + 40 * (seed % 3);
    p.decode_per_kv_token_s = 2e-6;
    p.prefill_attention_context_tokens = 500;
    std::vector<Arrival> arrivals;
    double t = 0;
    for (RequestId id = 0; id < 300; ++id) {
      t += std::exponential_distribution<double>(4.0 + static_cast<double>(seed))(rng);
      if (id % 37 == 5) t = std::round(t * 10) / 10;  // some arrivals exactly at step edges
      Arrival a{id, t, 1 + static_cast<std::int64_t>(rng() % 400), 1 + static_cast<std::int32_t>(rng() % 60), {}};
      const std::uint64_t doc = rng() % 4;
      const auto shared = static_cast<std::int64_t>(rng() % 30);
      for (std::int64_t b = 0; b * p.prefix_block_tokens < a.prompt; ++b)
        a.blocks.push_back(b < shared ? doc * 1000 + static_cast<std::uint64_t>(b) : (id + 1) * 1'000'000 + static_cast<std::uint64_t>(b));
      arrivals.push_back(std::move(a));
    }
    const auto want = Reference(p).run(arrivals);
    TimingModel m(p);
    std::map<RequestId, std::pair<double, double>> got;
    std::vector<Event> ev;
    auto collect = [&] {
      for (const auto& e : ev) {
        if (e.kind == EventKind::kFirstToken) got[e.id].first = e.t;
        if (e.kind == EventKind::kFinished) got[e.id].second = e.t;
      }
      ev.clear();
    };
    for (const auto& a : arrivals) {
      m.advance(a.t, ev);
      collect();
      m.submit(a.id, a.prompt, a.n, a.t, a.blocks);
    }
    m.advance(1e9, ev);
    collect();
    ASSERT_EQ(got.size(), want.size()) << "seed " << seed;
    for (const auto& [id, times] : want) {
      ASSERT_NEAR(got[id].first, times.first, 1e-9) << "seed " << seed << " request " << id;
      ASSERT_NEAR(got[id].second, times.second, 1e-9) << "seed " << seed << " request " << id;
    }
    EXPECT_GT(m.prefix_cache_stats().hits_tokens, 0) << "seed " << seed;
    EXPECT_GT(m.prefix_cache_stats().evicted_tokens, 0) << "seed " << seed;
  }
}

}  // namespace
}  // namespace tidegate::sim
