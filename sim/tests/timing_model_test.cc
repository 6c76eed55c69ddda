#include "tidegate/sim/timing_model.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tidegate::sim {
namespace {

TimingParams small_server() {
  TimingParams p;
  p.max_batch = 2;
  p.prefill_tokens_per_s = 1000;  // 1 ms per prompt token
  p.decode_base_s = 0.010;
  p.decode_per_seq_s = 0.001;
  p.decode_per_kv_token_s = 0;            // hand-computed times: no context-dependent costs
  p.prefill_attention_context_tokens = 0;
  p.kv_capacity_tokens = 1000;
  return p;
}

const Event* find(const std::vector<Event>& ev, RequestId id, EventKind kind, int tokens = -1) {
  auto it = std::find_if(ev.begin(), ev.end(), [&](const Event& e) {
    return e.id == id && e.kind == kind && (tokens < 0 || e.tokens == tokens);
  });
  return it == ev.end() ? nullptr : &*it;
}

TEST(TimingModel, SingleRequestHandComputed) {
  TimingModel m(small_server());
  m.submit(1, 100, 3, 0.0);
  EXPECT_NEAR(m.next_event_time(), 0.110, 1e-12);  // base 10 ms + 100 tokens at 1 ms
  auto ev = m.advance(1.0);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].kind, EventKind::kFirstToken);
  EXPECT_NEAR(ev[0].t, 0.110, 1e-12);
  EXPECT_EQ(ev[1].kind, EventKind::kToken);
  EXPECT_NEAR(ev[1].t, 0.121, 1e-12);  // decode step with 1 sequence: 10 + 1 ms
  EXPECT_EQ(ev[2].tokens, 3);
  EXPECT_NEAR(ev[2].t, 0.132, 1e-12);
  EXPECT_EQ(ev[3].kind, EventKind::kFinished);
  EXPECT_NEAR(ev[3].t, 0.132, 1e-12);
  EXPECT_EQ(m.next_event_time(), TimingModel::kNever);
  EXPECT_EQ(m.gauges().running, 0);
  EXPECT_EQ(m.gauges().kv_used_tokens, 0);
}

TEST(TimingModel, TtftGrowsUnderLoad) {
  TimingModel m(small_server());
  m.submit(1, 100, 10, 0.0);
  m.advance(0.05);
  m.submit(2, 100, 1, 0.05);
  // Request 2 waits for step 0 to end (0.110), then shares step 1 with request 1's decode:
  // 10 ms + 1 ms (one decoding sequence) + 100 ms prefill.
  auto ev = m.advance(10.0);
  const Event* first = find(ev, 2, EventKind::kFirstToken);
  ASSERT_NE(first, nullptr);
  EXPECT_NEAR(first->t, 0.221, 1e-12);
  EXPECT_GT(first->t - 0.05, 0.110);  // slower than the same request alone
  // Request 1's token 2 came out of the same slower step.
  const Event* tok2 = find(ev, 1, EventKind::kToken, 2);
  ASSERT_NE(tok2, nullptr);
  EXPECT_NEAR(tok2->t, 0.221, 1e-12);
}

TEST(TimingModel, BatchCapRespected) {
  TimingModel m(small_server());
  for (RequestId id = 1; id <= 3; ++id) m.submit(id, 10, 2, 0.0);
  EXPECT_EQ(m.gauges().running, 2);
  EXPECT_EQ(m.gauges().waiting, 1);
  auto ev = m.advance(0.035);  // after step 0 (30 ms), before step 1 ends (42 ms)
  EXPECT_EQ(m.gauges().running, 2);
  EXPECT_EQ(m.gauges().waiting, 1);
  EXPECT_EQ(m.gauges().kv_used_tokens, 2 * 10 + 2 * 1);
  ev = m.advance(1.0);
  const Event* fin1 = find(ev, 1, EventKind::kFinished);
  const Event* first3 = find(ev, 3, EventKind::kFirstToken);
  ASSERT_TRUE(fin1 && first3);
  EXPECT_NEAR(fin1->t, 0.042, 1e-12);
  EXPECT_NEAR(first3->t, 0.042 + 0.010 + 0.010, 1e-12);  // admitted when a slot freed
}

TEST(TimingModel, KvFullRequestsWait) {
  TimingParams p = small_server();
  p.kv_capacity_tokens = 250;
  TimingModel m(p);
  m.submit(1, 100, 100, 0.0);  // reserves 200 of 250
  m.submit(2, 100, 10, 0.0);   // needs 110: waits although a batch slot is free
  EXPECT_EQ(m.gauges().running, 1);
  EXPECT_EQ(m.gauges().waiting, 1);
  auto ev = m.advance(100.0);
  const Event* fin1 = find(ev, 1, EventKind::kFinished);
  const Event* first2 = find(ev, 2, EventKind::kFirstToken);
  ASSERT_TRUE(fin1 && first2);
  EXPECT_GT(first2->t, fin1->t);
}

TEST(TimingModel, PromptLargerThanKvIsRejected) {
  TimingParams p = small_server();
  p.kv_capacity_tokens = 250;
  TimingModel m(p);
  m.submit(7, 300, 5, 2.0);
  EXPECT_EQ(m.next_event_time(), 2.0);
  auto ev = m.advance(2.0);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EventKind::kRejected);
  EXPECT_EQ(ev[0].id, 7u);
  EXPECT_EQ(m.gauges().waiting, 0);
}

TEST(TimingModel, FixedLatencyExact) {
  TimingParams p;
  p.fixed_latency = true;
  p.ttft_s = 0.2;
  p.tpot_s = 0.05;
  TimingModel m(p);
  m.submit(1, 1000000, 4, 1.0);  // prompt size and KV do not matter in fixed mode
  auto ev = m.advance(10.0);
  ASSERT_EQ(ev.size(), 5u);
  const double want[] = {1.2, 1.25, 1.30, 1.35};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ev[i].tokens, i + 1);
    EXPECT_NEAR(ev[i].t, want[i], 1e-9);
  }
  EXPECT_EQ(ev[4].kind, EventKind::kFinished);
  EXPECT_NEAR(ev[4].t, 1.35, 1e-9);
}

TEST(TimingModel, FixedLatencyZeroIsImmediateAndBatchCapped) {
  TimingParams p;
  p.fixed_latency = true;
  p.max_batch = 1;
  p.ttft_s = 0.1;
  TimingModel m(p);
  m.submit(1, 5, 1, 0.0);
  m.submit(2, 5, 1, 0.0);
  EXPECT_EQ(m.gauges().running, 1);
  auto ev = m.advance(1.0);
  const Event* first2 = find(ev, 2, EventKind::kFirstToken);
  ASSERT_NE(first2, nullptr);
  EXPECT_NEAR(first2->t, 0.2, 1e-12);  // waited for request 1's slot
}

TEST(TimingModel, StartupDelaysEverything) {
  TimingParams p;
  p.fixed_latency = true;
  p.ttft_s = 0.5;
  p.startup_s = 5.0;
  TimingModel m(p, 1.0);
  EXPECT_FALSE(m.loaded(5.9));
  EXPECT_TRUE(m.loaded(6.0));
  m.submit(1, 5, 1, 2.0);
  EXPECT_EQ(m.gauges().waiting, 1);
  EXPECT_EQ(m.next_event_time(), 6.0);
  auto ev = m.advance(10.0);
  const Event* first = find(ev, 1, EventKind::kFirstToken);
  ASSERT_NE(first, nullptr);
  EXPECT_NEAR(first->t, 6.5, 1e-12);
}

TEST(TimingModel, CancelFreesSlot) {
  TimingModel m(small_server());
  m.submit(1, 10, 100, 0.0);
  m.submit(2, 10, 100, 0.0);
  m.submit(3, 10, 1, 0.0);
  m.advance(0.5);
  EXPECT_EQ(m.gauges().waiting, 1);
  EXPECT_TRUE(m.cancel(1, 0.5));
  EXPECT_FALSE(m.cancel(1, 0.5));
  auto ev = m.advance(1.0);
  EXPECT_EQ(find(ev, 1, EventKind::kToken), nullptr);
  EXPECT_NE(find(ev, 3, EventKind::kFinished), nullptr);
}

TEST(TimingModel, TokenEventsOffGivesSameTimes) {
  TimingParams on = small_server();
  TimingParams off = on;
  off.emit_token_events = false;
  TimingModel a(on), b(off);
  for (RequestId id = 1; id <= 5; ++id) {
    a.submit(id, 20 * id, static_cast<int>(3 * id), 0.01 * id);
    b.submit(id, 20 * id, static_cast<int>(3 * id), 0.01 * id);
  }
  auto ea = a.advance(100.0);
  auto eb = b.advance(100.0);
  std::erase_if(ea, [](const Event& e) { return e.kind == EventKind::kToken; });
  ASSERT_EQ(ea.size(), eb.size());
  for (RequestId id = 1; id <= 5; ++id) {
    for (EventKind k : {EventKind::kFirstToken, EventKind::kFinished}) {
      const Event* x = find(ea, id, k);
      const Event* y = find(eb, id, k);
      ASSERT_TRUE(x && y);
      EXPECT_DOUBLE_EQ(x->t, y->t);
      EXPECT_EQ(x->tokens, y->tokens);
    }
  }
}

TEST(TimingModel, EventsComeOutInTimeOrder) {
  TimingParams p;  // the documented defaults
  TimingModel m(p);
  std::vector<Event> ev;
  for (RequestId id = 0; id < 500; ++id) {
    const double t = 0.003 * id;
    m.advance(t, ev);
    m.submit(id, 200 + (id % 7) * 100, 50 + (id % 13) * 20, t);
    EXPECT_LE(m.gauges().running, p.max_batch);
  }
  m.advance(1e6, ev);
  EXPECT_TRUE(std::is_sorted(ev.begin(), ev.end(), [](const Event& a, const Event& b) { return a.t < b.t; }));
  EXPECT_EQ(std::count_if(ev.begin(), ev.end(), [](const Event& e) { return e.kind == EventKind::kFinished; }), 500);
}

}  // namespace
}  // namespace tidegate::sim
