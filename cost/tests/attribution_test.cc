// Sharing replica time among requests, idle and standby, estimates, clock jumps, failures.
#include <gtest/gtest.h>

#include "test_util.h"

namespace tidegate::cost {
namespace {

using testing::config_from;
using testing::kOneDollarPerSecond;
using testing::metric_sum;

class Attribution : public ::testing::Test {
 protected:
  prometheus::Registry registry;
  std::unique_ptr<CostAccounting> acc = make_cost_accounting(config_from(kOneDollarPerSecond), registry);
  RequestLabels a{"llama", "acme", "key-a", {}};
  RequestLabels b{"llama", "globex", "key-b", {}};

  void expect_conserved() {
    const auto t = acc->totals();
    EXPECT_NEAR(t.bill_usd, t.request_usd + t.idle_usd + t.standby_usd + t.pending_usd, 1e-9 * (1 + t.bill_usd));
    EXPECT_NEAR(metric_sum(registry, "tidegate_replica_cost_usd_total"), metric_sum(registry, "tidegate_cost_usd_total") + t.pending_usd,
                1e-9 * (1 + t.bill_usd));
  }
};

TEST_F(Attribution, ConcurrentStreamsShareByTokenWork) {
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, 0);
  const auto ha = acc->request_started(a, "r1", 0);
  const auto hb = acc->request_started(b, "r1", 0);
  for (int s = 1; s <= 10; ++s) {
    acc->request_progress(ha, 100, 10 * s, s);  // prompt reported with the first chunk
    acc->request_progress(hb, 100, 30 * s, s);
  }
  // Second 1 carries both prompts: a = 100 + 4*10, b = 100 + 4*30; then 40 vs 120 per second.
  const double ca = acc->request_finished(ha, 10);
  const double cb = acc->request_finished(hb, 10);
  EXPECT_NEAR(ca + cb, 10.0, 1e-9);
  EXPECT_NEAR(ca, 140.0 / 360 + 9 * 0.25, 1e-9);
  EXPECT_NEAR(cb, 220.0 / 360 + 9 * 0.75, 1e-9);
  expect_conserved();
  EXPECT_NEAR(metric_sum(registry, "tidegate_cost_usd_total", "tenant", "acme"), ca, 1e-9);
  EXPECT_DOUBLE_EQ(metric_sum(registry, "tidegate_tokens_total", "type", "completion"), 400);
}

TEST(ApiModels, AreBilledPerTokenEvenWhenTheGatewayListsTheirEndpointAsAReplica) {
  prometheus::Registry registry;
  auto acc = make_cost_accounting(testing::config_from(R"(
replica_classes: {h100: {usd_per_hour: 3600}}
models: {llama: h100}
api_models:
  hosted: {input_usd_per_1m: 2.5, output_usd_per_1m: 10}
)"),
                                  registry);
  // What the gateway does for every replica its config lists, the API endpoint included.
  acc->replica_state("api-endpoint", "hosted", "", ReplicaState::kActive, 0);
  RequestLabels labels;
  labels.model = "hosted";
  labels.tenant = "acme";
  const auto h = acc->request_started(labels, "api-endpoint", 1);
  acc->request_progress(h, 1000, 100, 2);
  EXPECT_NEAR(acc->request_finished(h, 2), (1000 * 2.5 + 100 * 10) / 1e6, 1e-12);
  EXPECT_NEAR(metric_sum(registry, "tidegate_cost_usd_total", "tenant", "acme"), 0.0035, 1e-12);
  EXPECT_EQ(metric_sum(registry, "tidegate_cost_events_total", "reason", "unknown_replica_class"), 0);
}

TEST_F(Attribution, CachedPromptTokensArePricedLower) {
  // Two requests in one segment with the same prompt and answer; b's engine found 900 of its
  // 1000 prompt tokens in its prefix cache. Work: a = 1000 + 4*50 = 1200, b = 100 + 900*0.1 +
  // 4*50 = 390 (w_cached_prompt 0.1): the 10 s share 1200 : 390.
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, 0);
  const auto ha = acc->request_started(a, "r1", 0);
  const auto hb = acc->request_started(b, "r1", 0);
  acc->request_progress(ha, 1000, 50, 10);
  acc->request_progress(hb, 1000, 50, 10, 900);
  const double ca = acc->request_finished(ha, 10);
  const double cb = acc->request_finished(hb, 10);
  EXPECT_NEAR(ca, 10.0 * 1200 / 1590, 1e-9);
  EXPECT_NEAR(cb, 10.0 * 390 / 1590, 1e-9);
  expect_conserved();
  // A cached count above the prompt is capped at the prompt.
  CostConfig c;
  EXPECT_DOUBLE_EQ(c.work(100, 0, 500), 100 * c.w_cached_prompt);
  EXPECT_DOUBLE_EQ(c.work(100, 10, -5), 100 + 40);
}

TEST_F(Attribution, IdleAndStandbyFollowTheLifecycle) {
  acc->replica_state("r1", "llama", "half", ReplicaState::kStarting, 0);  // $0.5/s
  acc->replica_state("r1", "llama", "half", ReplicaState::kWarm, 10);     // $0.5/s
  acc->replica_state("r1", "llama", "half", ReplicaState::kActive, 20);   // $1/s, empty: idle
  const auto h = acc->request_started(a, "r1", 30);
  acc->request_progress(h, 10, 10, 35);
  EXPECT_NEAR(acc->request_finished(h, 35), 5.0, 1e-9);
  acc->replica_state("r1", "llama", "half", ReplicaState::kDraining, 40);  // idle 35..40
  acc->replica_state("r1", "llama", "half", ReplicaState::kStopped, 50);   // draining empty: standby
  acc->advance(100);
  const auto t = acc->totals();
  EXPECT_NEAR(t.standby_usd, 5 + 5 + 10, 1e-9);
  EXPECT_NEAR(t.idle_usd, 10 + 5, 1e-9);
  EXPECT_NEAR(t.bill_usd, 40, 1e-9);
  expect_conserved();
  EXPECT_NEAR(metric_sum(registry, "tidegate_replica_cost_usd_total", "state", "warm"), 5, 1e-9);
  EXPECT_NEAR(metric_sum(registry, "tidegate_cost_usd_total", "kind", "idle"), 15, 1e-9);
}

TEST_F(Attribution, NonStreamRequestIsEstimatedThenSettledExactly) {
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, 0);
  const auto stream = acc->request_started(a, "r1", 0);
  const auto whole = acc->request_started(b, "r1", 0);  // reports only at its end
  for (int s = 1; s <= 5; ++s) acc->request_progress(stream, 0, 10 * s, s);
  // The stream finishes while the other has no report yet: the model has no history, so the
  // silent request is assumed to work like the mean member; the stream's cost is final now.
  const double cs = acc->request_finished(stream, 5);
  EXPECT_NEAR(cs, 2.5, 1e-9);
  EXPECT_GT(acc->totals().estimated_members, 0u);
  acc->request_progress(whole, 50, 50, 10);
  const double cw = acc->request_finished(whole, 10);
  EXPECT_NEAR(cw, 7.5, 1e-9);
  expect_conserved();
}

TEST_F(Attribution, SilentRequestUsesModelRateOnceKnown) {
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, 0);
  // History: one finished request that did 100 work units per second.
  const auto warmup = acc->request_started(a, "r1", 0);
  acc->request_progress(warmup, 0, 250, 10);
  acc->request_finished(warmup, 10);
  const auto stream = acc->request_started(a, "r1", 10);
  const auto whole = acc->request_started(b, "r1", 10);
  for (int s = 1; s <= 10; ++s) acc->request_progress(stream, 0, 75 * s, 10 + s);  // 300 work/s
  const double cs = acc->request_finished(stream, 20);
  EXPECT_NEAR(cs, 10.0 * 300 / 400, 1e-9);  // the silent one is estimated at the model's 100/s
  acc->request_progress(whole, 1000, 0, 20);
  EXPECT_NEAR(acc->request_finished(whole, 20), 2.5, 1e-9);
  expect_conserved();
}

TEST_F(Attribution, DrainingTimeBelongsToTheRequestsStillRunning) {
  acc->replica_state("r1", "llama", "half", ReplicaState::kActive, 0);
  const auto h = acc->request_started(a, "r1", 0);
  acc->replica_state("r1", "llama", "half", ReplicaState::kDraining, 4);  // $1/s while draining too
  acc->request_progress(h, 10, 10, 10);
  EXPECT_NEAR(acc->request_finished(h, 10), 10.0, 1e-9);  // the request is why the replica is still up
  acc->replica_state("r1", "llama", "half", ReplicaState::kStopped, 12);
  EXPECT_NEAR(acc->totals().standby_usd, 2.0, 1e-9);       // drained and empty: shutdown overhead
  expect_conserved();
}

TEST_F(Attribution, CacheHitWithoutHistorySavesNothingAndSaysSo) {
  double saving = -1;
  EXPECT_DOUBLE_EQ(acc->cache_hit(a, 10, 10, 1, &saving), 0.001);
  EXPECT_EQ(saving, 0.0);
  EXPECT_EQ(metric_sum(registry, "tidegate_cost_events_total", "reason", "saving_without_history"), 1);
}

TEST_F(Attribution, FailedRequestAfterTokensStillPays) {
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, 0);
  const auto h = acc->request_started(a, "r1", 0);
  acc->request_progress(h, 20, 5, 2);
  // The upstream connection dies at t=3: the gateway finishes the request without a final report.
  EXPECT_NEAR(acc->request_finished(h, 3), 3.0, 1e-9);
  EXPECT_NEAR(metric_sum(registry, "tidegate_cost_usd_total", "tenant", "acme"), 3.0, 1e-9);
  expect_conserved();
}

TEST_F(Attribution, ClockJumpsBackwardNeverCostNegative) {
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, 100);
  const auto h = acc->request_started(a, "r1", 110);
  acc->request_progress(h, 10, 10, 90);  // clock stepped back 20 s
  acc->request_progress(h, 10, 20, 95);
  const double c = acc->request_finished(h, 120);
  EXPECT_GE(c, 0);
  EXPECT_NEAR(c, 10.0, 1e-9);  // 110..120; the backward reports add no time
  acc->replica_state("r1", "llama", "", ReplicaState::kStopped, 50);
  const auto t = acc->totals();
  EXPECT_GE(t.clock_regressions, 3u);
  EXPECT_NEAR(t.bill_usd, 20, 1e-9);
  EXPECT_NEAR(t.idle_usd, 10, 1e-9);
  EXPECT_GE(metric_sum(registry, "tidegate_cost_events_total", "reason", "clock_regression"), 2);
  expect_conserved();
}

TEST_F(Attribution, PaidApiPricedPerToken) {
  const auto h = acc->request_started({"gpt-4o-mini", "acme", "k", {}}, "openai", 0);
  acc->request_progress(h, 1000, 500, 1);
  EXPECT_NEAR(acc->request_finished(h, 2), (1000 * 1000 + 500 * 4000) / 1e6, 1e-12);
  EXPECT_NEAR(metric_sum(registry, "tidegate_replica_cost_usd_total", "class", "api"), 3.0, 1e-12);
  expect_conserved();
}

TEST_F(Attribution, CacheHitCostsLookupAndSavesRecentCostPerToken) {
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, 0);
  const auto h = acc->request_started(a, "r1", 0);
  acc->request_progress(h, 100, 100, 10);  // work 500 for $10: $0.02 per unit
  acc->request_finished(h, 10);
  double saving = -1;
  const double cost = acc->cache_hit(b, 50, 25, 11, &saving);  // work 150
  EXPECT_DOUBLE_EQ(cost, 0.001);
  EXPECT_NEAR(saving, 150 * 0.02, 1e-12);
  EXPECT_NEAR(metric_sum(registry, "tidegate_cache_savings_usd_total", "tenant", "globex"), 3.0, 1e-12);
  EXPECT_NEAR(metric_sum(registry, "tidegate_tokens_total", "type", "cached"), 75, 1e-12);
  // API models save their list price.
  acc->cache_hit({"gpt-4o-mini", "acme", "k", {}}, 1000, 0, 12, &saving);
  EXPECT_NEAR(saving, 1.0, 1e-12);
  acc->replica_state("r1", "llama", "", ReplicaState::kStopped, 12);
  expect_conserved();
}

TEST_F(Attribution, UnknownReplicaIsCountedNotBilled) {
  const auto h = acc->request_started(a, "nowhere", 0);
  acc->request_progress(h, 10, 10, 1);
  EXPECT_EQ(acc->request_finished(h, 2), 0.0);
  EXPECT_EQ(acc->request_finished(h, 3), 0.0);  // finishing twice is harmless
  EXPECT_EQ(metric_sum(registry, "tidegate_cost_events_total", "reason", "unknown_replica"), 1);
  EXPECT_EQ(metric_sum(registry, "tidegate_cost_events_total", "reason", "unknown_handle"), 1);
}

TEST(AttributionTags, LabelsBoundedByAllowList) {
  prometheus::Registry registry;
  auto acc = make_cost_accounting(testing::config_from(std::string(kOneDollarPerSecond) +
                                                       "tags: {labels: [team, project], values: {team: [ml]}, "
                                                       "max_values: 2}\n"),
                                  registry);
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, 0);
  double t = 0;
  for (const auto& [team, project] : std::vector<std::pair<std::string, std::string>>{
           {"ml", "p1"}, {"web", "p2"}, {"ml", "p3"}, {"ops", "p4"}}) {
    const auto h = acc->request_started({"llama", "acme", "k", {{"team", team}, {"project", project}}}, "r1", t);
    acc->request_progress(h, 1, 1, t + 1);
    acc->request_finished(h, t + 1);
    t += 1;
  }
  std::set<std::string> teams, projects;
  for (const auto& f : registry.Collect())
    if (f.name == "tidegate_cost_usd_total")
      for (const auto& m : f.metric)
        for (const auto& l : m.label) {
          if (l.name == "team") teams.insert(l.value);
          if (l.name == "project") projects.insert(l.value);
        }
  EXPECT_EQ(teams, (std::set<std::string>{"ml", "other"}));
  EXPECT_EQ(projects, (std::set<std::string>{"p1", "p2", "other"}));
}

TEST_F(Attribution, CacheAuditsArePricedAsAuditCostOutsideBudgets) {
  // Issue 19: the cache re-asks the model about a sampled hit. It shares replica time like any
  // request, but as kind="audit" under tenant "(audit)", never as the client's spend.
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, 0);
  RequestLabels audit = a;
  audit.audit = true;
  const auto ha = acc->request_started(a, "r1", 0);
  const auto hx = acc->request_started(audit, "r1", 0);
  acc->request_progress(ha, 100, 25, 10);
  acc->request_progress(hx, 100, 25, 10);
  EXPECT_NEAR(acc->request_finished(ha, 10), 5.0, 1e-9);
  EXPECT_NEAR(acc->request_finished(hx, 10), 5.0, 1e-9);
  expect_conserved();
  EXPECT_NEAR(metric_sum(registry, "tidegate_cost_usd_total", "kind", "audit"), 5.0, 1e-9);
  EXPECT_NEAR(metric_sum(registry, "tidegate_cost_usd_total", "tenant", kAuditTenant), 5.0, 1e-9);
  EXPECT_NEAR(metric_sum(registry, "tidegate_cost_usd_total", "tenant", "acme"), 5.0, 1e-9);
  EXPECT_NEAR(metric_sum(registry, "tidegate_cost_usd_total", "kind", "request"), 5.0, 1e-9);
}

}  // namespace
}  // namespace tidegate::cost
