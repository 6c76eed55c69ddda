// The cache and cost filters on one request context, with a fake cache and a recording ledger
// (issue 21): the cache filter leaves a typed CacheOutcome that the cost filter reads to price a
// hit, and nothing else; a miss is stored after a complete answer and not after a cut one; the
// cache's own audits are neither looked up nor priced as hits.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "cache_filter.h"
#include "cost_filter.h"

using namespace tidegate;

namespace {

class FakeCache final : public cache::SemanticCache {
 public:
  cache::LookupResult next;  // what every lookup answers
  int lookups = 0;
  std::vector<cache::CachedAnswer> inserted;
  bool read = true;

  cache::CachePlan plan(const cache::RequestView& r) const override {
    cache::CachePlan p;
    p.read = read;
    p.write = true;
    p.status_without_hit = read ? cache::CacheStatus::kMiss : cache::CacheStatus::kBypass;
    p.model = r.model;
    p.text = "q";
    return p;
  }
  void lookup(const cache::CachePlan&, std::chrono::steady_clock::time_point,
              std::function<void(cache::LookupResult)> done) override {
    ++lookups;
    done(next);
  }
  void insert(const cache::CachePlan&, cache::CachedAnswer a) override { inserted.push_back(std::move(a)); }
  boost::json::object stats() const override { return {}; }
  std::size_t erase(const std::optional<std::string>&, const std::optional<std::string>&) override { return 0; }
  bool erase_entry(std::uint64_t) override { return false; }
  void shutdown() override {}
};

class RecordingLedger final : public cost::CostAccounting {
 public:
  int hits_priced = 0;
  void replica_state(const std::string&, const std::string&, const std::string&, tidegate::ReplicaState, double) override {}
  std::uint64_t request_started(const cost::RequestLabels&, const std::string&, double) override { return 1; }
  void request_progress(std::uint64_t, std::int64_t, std::int64_t, double, std::int64_t) override {}
  double request_finished(std::uint64_t, double) override { return 0.5; }
  double cache_hit(const cost::RequestLabels&, std::int64_t prompt, std::int64_t completion, double,
                   double* saving) override {
    ++hits_priced;
    *saving = 0.001 * static_cast<double>(prompt + completion);
    return 0.0001;
  }
  cost::BudgetDecision check_budget(const cost::RequestLabels&, double) override { return {}; }
  std::pair<std::string, std::string> report(const std::string&, std::optional<double>, std::optional<double>,
                                             const std::string&) override {
    return {};
  }
  boost::json::object dashboard_snapshot(double) override { return {}; }
  void flush() override {}
};

std::shared_ptr<gateway::RequestContext> chat_request() {
  auto ctx = std::make_shared<gateway::RequestContext>();
  ctx->path = "/v1/chat/completions";
  ctx->model = "m";
  ctx->tenant = "acme";
  ctx->body = std::make_shared<boost::json::value>(
      boost::json::parse(R"({"model":"m","messages":[{"role":"user","content":"What is a tidegate?"}]})"));
  return ctx;
}

struct Filters {
  std::shared_ptr<FakeCache> cache = std::make_shared<FakeCache>();
  std::shared_ptr<RecordingLedger> ledger = std::make_shared<RecordingLedger>();
  app::CostFilter cost{ledger, [] { return 1.8e9; }};
  app::CacheFilter cache_filter{cache};

  // pre_forward of the cache filter; the reply it answered with, if any.
  std::optional<gateway::LocalReply> ask(const std::shared_ptr<gateway::RequestContext>& ctx) {
    std::optional<gateway::LocalReply> got;
    bool called = false;
    cache_filter.pre_forward(ctx, [&](std::optional<gateway::LocalReply> r) {
      called = true;
      got = std::move(r);
    });
    EXPECT_TRUE(called);
    return got;
  }
};

std::string header(const gateway::Headers& h, const std::string& name) {
  for (const auto& [k, v] : h)
    if (k == name) return v;
  return {};
}

}  // namespace

TEST(CacheAndCostFilters, AHitIsAnsweredAndPricedFromTheTypedOutcome) {
  Filters f;
  f.cache->next.status = cache::CacheStatus::kHit;
  f.cache->next.entry_id = 42;
  f.cache->next.answer = {"A gate that holds back the tide.", "stop", 6, 8};
  auto ctx = chat_request();
  const auto reply = f.ask(ctx);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->reason, "cache_hit");
  EXPECT_EQ(header(reply->headers, "x-tidegate-cache"), "hit");
  EXPECT_EQ(header(reply->headers, "x-tidegate-cache-entry"), "42");
  EXPECT_NE(reply->body.find("holds back the tide"), std::string::npos);
  const auto* outcome = ctx->filter_state.find<app::CacheOutcome>();
  ASSERT_NE(outcome, nullptr);
  EXPECT_TRUE(outcome->hit());
  EXPECT_EQ(outcome->entry_id, 42u);
  EXPECT_EQ(ctx->prompt_tokens, 6);
  // The gateway marks the request answered locally, then asks for response headers.
  ctx->local_reply = true;
  ctx->status = 200;
  f.cost.on_response_headers(*ctx);
  EXPECT_EQ(f.ledger->hits_priced, 1);
  EXPECT_EQ(header(ctx->response_headers, "x-tidegate-cost-usd"), "0.00010000");
  EXPECT_EQ(ctx->attributes.at("cache_saving_usd"), "0.01400000");
  // A hit is not stored again.
  ctx->complete = true;
  f.cache_filter.on_complete(*ctx);
  EXPECT_TRUE(f.cache->inserted.empty());
}

TEST(CacheAndCostFilters, OtherLocalRepliesAreNotPricedAsHits) {
  Filters f;
  // A miss answered locally by a later filter (a budget refusal, say) costs nothing.
  f.cache->next.status = cache::CacheStatus::kMiss;
  auto ctx = chat_request();
  EXPECT_FALSE(f.ask(ctx));
  EXPECT_FALSE(ctx->filter_state.find<app::CacheOutcome>()->hit());
  ctx->local_reply = true;
  ctx->status = 429;
  f.cost.on_response_headers(*ctx);
  EXPECT_EQ(f.ledger->hits_priced, 0);
  EXPECT_EQ(header(ctx->response_headers, "x-tidegate-cost-usd"), "");
  // A request the cache never saw (another endpoint): no outcome at all, nothing priced.
  auto other = std::make_shared<gateway::RequestContext>();
  other->path = "/v1/embeddings";
  other->local_reply = true;
  f.cost.on_response_headers(*other);
  EXPECT_EQ(other->filter_state.find<app::CacheOutcome>(), nullptr);
  EXPECT_EQ(f.ledger->hits_priced, 0);
  // Bypassed (the plan does not read): the outcome says so, no lookup.
  f.cache->read = false;
  auto bypassed = chat_request();
  EXPECT_FALSE(f.ask(bypassed));
  EXPECT_EQ(bypassed->filter_state.find<app::CacheOutcome>()->status, cache::CacheStatus::kBypass);
  EXPECT_EQ(header(bypassed->response_headers, "x-tidegate-cache"), "bypass");
  EXPECT_EQ(f.cache->lookups, 1);
}

TEST(CacheAndCostFilters, AMissIsStoredOnlyWhenTheAnswerIsWhole) {
  Filters f;
  f.cache->next.status = cache::CacheStatus::kMiss;
  auto ctx = chat_request();
  EXPECT_FALSE(f.ask(ctx));
  EXPECT_EQ(header(ctx->response_headers, "x-tidegate-cache"), "miss");
  ctx->status = 200;
  ctx->complete = true;
  ctx->finish_reason = "stop";
  ctx->content = "the answer";
  ctx->prompt_tokens = 5;
  ctx->completion_tokens = 2;
  f.cache_filter.on_complete(*ctx);
  ASSERT_EQ(f.cache->inserted.size(), 1u);
  EXPECT_EQ(f.cache->inserted[0].content, "the answer");
  for (const auto& [complete, finish] : {std::pair{false, "stop"}, std::pair{true, "tool_calls"}}) {
    auto cut = chat_request();
    f.ask(cut);
    cut->status = 200;
    cut->complete = complete;
    cut->finish_reason = finish;
    f.cache_filter.on_complete(*cut);
  }
  EXPECT_EQ(f.cache->inserted.size(), 1u);
}
