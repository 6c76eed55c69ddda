#include "cache_fixture.h"

#include <mutex>
#include <tuple>

using namespace tidegate::cache;
using namespace tidegate::cache::fakes;

namespace {

CacheConfig base_config() {
  CacheConfig c;
  c.threshold = 0.9;
  c.lookup_timeout_s = 5;
  return c;
}

}  // namespace

TEST(SemanticCache, MissThenHitThenParaphraseAndUnrelated) {
  CacheHarness h(base_config());
  const auto p = h.plan(chat_body("What is the capital of France?"));
  ASSERT_TRUE(p.read);
  EXPECT_EQ(h.lookup(p).status, CacheStatus::kMiss);
  h.insert_and_wait(p, "Paris.");
  const auto r = h.lookup(h.plan(chat_body("what is the capital of france")));
  ASSERT_EQ(r.status, CacheStatus::kHit);
  EXPECT_EQ(r.answer.content, "Paris.");
  EXPECT_EQ(r.answer.completion_tokens, 20);
  EXPECT_GT(r.similarity, 0.99f);
  EXPECT_GE(r.age_s, 0.0);
  EXPECT_GT(r.entry_id, 0u);
  EXPECT_EQ(h.lookup(h.plan(chat_body("Tell me a joke about cats"))).status, CacheStatus::kMiss);
  EXPECT_EQ(h.counter("tidegate_cache_lookups_total", "result=hit"), 1);
  EXPECT_EQ(h.counter("tidegate_cache_lookups_total", "result=miss"), 2);
  EXPECT_EQ(h.counter("tidegate_cache_lookups_total", "model=m"), 3);  // hit rate per model on dashboards
  EXPECT_EQ(h.counter("tidegate_cache_tokens_saved_total", "kind=completion"), 20);
}

TEST(SemanticCache, ThresholdDecides) {
  // "what is the capital city of france" shares 6 of 7 words with the stored question.
  const std::string stored = "what is the capital of france", query = "what is the capital city of france";
  WordEmbedder e(64);
  const auto a = e.one(stored), b = e.one(query);
  double sim = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sim += double(a[i]) * b[i];
  ASSERT_GT(sim, 0.5);
  ASSERT_LT(sim, 0.99);
  for (const double threshold : {sim - 0.02, sim + 0.02}) {
    auto cfg = base_config();
    cfg.threshold = threshold;
    CacheHarness h(cfg);
    h.insert_and_wait(h.plan(chat_body(stored)), "Paris.");
    const auto r = h.lookup(h.plan(chat_body(query)));
    EXPECT_EQ(r.status, threshold < sim ? CacheStatus::kHit : CacheStatus::kMiss) << threshold;
    EXPECT_NEAR(r.similarity, sim, 1e-3);
  }
  // A per-model threshold overrides the default.
  auto cfg = base_config();
  cfg.threshold = sim - 0.02;
  cfg.models["strict"].threshold = 0.999;
  CacheHarness h(cfg);
  h.insert_and_wait(h.plan(chat_body(stored), "t1", "strict"), "Paris.");
  EXPECT_EQ(h.lookup(h.plan(chat_body(query), "t1", "strict")).status, CacheStatus::kMiss);
}

TEST(SemanticCache, TwoTenantsNeverSeeEachOthersAnswer) {
  CacheHarness h(base_config());
  const auto body = chat_body("What is our internal roadmap?");
  h.insert_and_wait(h.plan(body, "acme"), "acme secret");
  EXPECT_EQ(h.lookup(h.plan(body, "globex")).status, CacheStatus::kMiss);
  h.insert_and_wait(h.plan(body, "globex"), "globex secret");
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(h.lookup(h.plan(body, "acme")).answer.content, "acme secret");
    EXPECT_EQ(h.lookup(h.plan(body, "globex")).answer.content, "globex secret");
  }
  EXPECT_EQ(h.lookup(h.plan(body, "initech")).status, CacheStatus::kMiss);
}

TEST(SemanticCache, SharedPoolServesAllTenants) {
  auto cfg = base_config();
  cfg.models["m"].shared = true;
  CacheHarness h(cfg);
  const auto body = chat_body("What is the capital of France?");
  h.insert_and_wait(h.plan(body, "acme"), "Paris.");
  EXPECT_EQ(h.lookup(h.plan(body, "globex")).status, CacheStatus::kHit);
}

TEST(SemanticCache, ScopeIsolationAcrossModelsSystemPromptsAndParams) {
  CacheHarness h(base_config());
  const auto body = chat_body("What is the capital of France?");
  h.insert_and_wait(h.plan(body), "Paris.");
  EXPECT_EQ(h.lookup(h.plan(body, "t1", "other-model")).status, CacheStatus::kMiss);
  EXPECT_EQ(h.lookup(h.plan(chat_body("What is the capital of France?", "Answer like a pirate."))).status,
            CacheStatus::kMiss);
  auto with_params = body;
  with_params["response_format"] = boost::json::object{{"type", "json_object"}};
  EXPECT_EQ(h.lookup(h.plan(with_params)).status, CacheStatus::kMiss);
  with_params = body;
  with_params["max_tokens"] = 3;
  EXPECT_EQ(h.lookup(h.plan(with_params)).status, CacheStatus::kMiss);
  with_params = body;
  with_params["temperature"] = 0.3;  // sampling only: same scope
  EXPECT_EQ(h.lookup(h.plan(with_params)).status, CacheStatus::kHit);
}

TEST(SemanticCache, OnlyCompleteAnswersAreStored) {
  CacheHarness h(base_config());
  const auto p = h.plan(chat_body("What is the capital of France?"));
  for (const char* finish : {"content_filter", "tool_calls", "", "error"}) h.cache->insert(p, CachedAnswer{"x", finish, 1, 1});
  h.cache->insert(p, CachedAnswer{"", "stop", 1, 0});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(h.cache->stats().at("entries").as_uint64(), 0u);
  EXPECT_EQ(h.counter("tidegate_cache_insert_skipped_total"), 5);
  h.insert_and_wait(p, "Paris, and the answer was cut", "length");
  const auto r = h.lookup(p);
  EXPECT_EQ(r.status, CacheStatus::kHit);
  EXPECT_EQ(r.answer.finish_reason, "length");
}

TEST(SemanticCache, NoCacheSkipsReadButStores) {
  CacheHarness h(base_config());
  const auto body = chat_body("What is the capital of France?");
  auto v = CacheHarness::view(body);
  v.cache_control = "no-cache";
  const auto p = h.cache->plan(v);
  EXPECT_FALSE(p.read);
  EXPECT_TRUE(p.write);
  h.insert_and_wait(p, "Paris.");
  EXPECT_EQ(h.lookup(h.plan(body)).status, CacheStatus::kHit);
  EXPECT_EQ(h.counter("tidegate_cache_lookups_total", "reason=no-cache"), 1);
}

TEST(SemanticCache, FailsOpenWhenEmbedderIsSlowOrDown) {
  auto cfg = base_config();
  cfg.workers = 1;
  CacheHarness h(cfg);
  const auto p = h.plan(chat_body("What is the capital of France?"));
  h.embedder->delay_ms = 400;
  auto r = h.lookup(p, std::chrono::milliseconds(30));
  EXPECT_EQ(r.status, CacheStatus::kBypass);
  EXPECT_EQ(r.reason, "timeout");
  h.embedder->delay_ms = 0;
  h.embedder->fail = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(450));  // let the slow call finish
  r = h.lookup(p);
  EXPECT_EQ(r.status, CacheStatus::kBypass);
  EXPECT_EQ(r.reason, "embedder-error");
  EXPECT_EQ(h.counter("tidegate_cache_lookups_total", "reason=timeout"), 1);
  EXPECT_EQ(h.counter("tidegate_cache_lookups_total", "reason=embedder-error"), 1);
  h.embedder->fail = false;
  EXPECT_EQ(h.lookup(p).status, CacheStatus::kMiss);  // recovers by itself
}

TEST(SemanticCache, OverloadedQueueBypasses) {
  auto cfg = base_config();
  cfg.workers = 1;
  cfg.max_queue = 1;
  CacheHarness h(cfg);
  h.embedder->delay_ms = 200;
  const auto p = h.plan(chat_body("What is the capital of France?"));
  std::vector<std::future<LookupResult>> results;
  std::vector<std::shared_ptr<std::promise<LookupResult>>> promises;
  for (int i = 0; i < 4; ++i) {
    auto pr = std::make_shared<std::promise<LookupResult>>();
    results.push_back(pr->get_future());
    h.cache->lookup(p, std::chrono::steady_clock::now() + std::chrono::seconds(5),
                    [pr](LookupResult r) { pr->set_value(std::move(r)); });
    promises.push_back(pr);
  }
  int overloaded = 0;
  for (auto& f : results) overloaded += f.get().reason == "overloaded";
  EXPECT_GE(overloaded, 2);
}

TEST(SemanticCache, AdminEraseAndStats) {
  CacheHarness h(base_config());
  h.insert_and_wait(h.plan(chat_body("question one"), "a", "m"), "1");
  h.insert_and_wait(h.plan(chat_body("question two"), "b", "m"), "2");
  h.insert_and_wait(h.plan(chat_body("question three"), "b", "n"), "3");
  auto s = h.cache->stats();
  EXPECT_EQ(s.at("entries").as_uint64(), 3u);
  EXPECT_EQ(s.at("embedder").as_string(), "test-words");
  EXPECT_EQ(h.cache->erase(std::string("b"), std::string("m")), 1u);
  const auto r = h.lookup(h.plan(chat_body("question three"), "b", "n"));
  ASSERT_EQ(r.status, CacheStatus::kHit);
  EXPECT_TRUE(h.cache->erase_entry(r.entry_id));
  EXPECT_FALSE(h.cache->erase_entry(r.entry_id));
  EXPECT_EQ(h.lookup(h.plan(chat_body("question three"), "b", "n")).status, CacheStatus::kMiss);
  EXPECT_EQ(h.cache->erase(std::nullopt, std::nullopt), 1u);
  EXPECT_EQ(h.cache->stats().at("entries").as_uint64(), 0u);
  EXPECT_EQ(h.counter("tidegate_cache_evictions_total", "reason=admin"), 3);
}

TEST(SemanticCache, MetricsAreExported) {
  CacheHarness h(base_config());
  const auto p = h.plan(chat_body("What is the capital of France?"));
  h.insert_and_wait(p, "Paris.");
  h.lookup(p);
  const auto text = h.metrics_text();
  for (const char* name : {"tidegate_cache_lookups_total", "tidegate_cache_hit_similarity_bucket",
                           "tidegate_cache_embed_seconds_bucket", "tidegate_cache_search_seconds_bucket",
                           "tidegate_cache_entries", "tidegate_cache_bytes", "tidegate_cache_tokens_saved_total",
                           "tidegate_cache_inserts_total"})
    EXPECT_NE(text.find(name), std::string::npos) << name;
}

TEST(SemanticCache, TtlPerRequestAndShutdown) {
  CacheHarness h(base_config());
  const auto body = chat_body("What is the capital of France?");
  auto v = CacheHarness::view(body);
  v.ttl_override_s = 0.05;
  h.insert_and_wait(h.cache->plan(v), "Paris.");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(h.lookup(h.plan(body)).status, CacheStatus::kMiss);  // expired
  h.cache->shutdown();
  const auto p = h.plan(body);
  EXPECT_FALSE(p.read);
  EXPECT_EQ(p.reason, "shutdown");
  auto r = h.lookup(p);
  EXPECT_EQ(r.status, CacheStatus::kBypass);
}

TEST(SemanticCache, DisabledConfigGivesNoCache) {
  prometheus::Registry registry;
  auto cfg = std::make_shared<CacheConfig>();
  cfg->enabled = false;
  EXPECT_EQ(make_semantic_cache(cfg, registry, std::make_shared<WordEmbedder>()), nullptr);
}

// Issue 22 (several gateways): an insert is heard with its vector once embedded; another
// gateway's cache stores it from that vector without embedding it (and does not hear it again);
// a vector of another size is embedded there instead.
TEST(SemanticCache, PeerInsertsReuseTheSendersVector) {
  CacheHarness sender(base_config()), receiver(base_config());
  std::mutex mu;
  std::vector<std::tuple<CachePlan, CachedAnswer, std::vector<float>>> heard;
  int receiver_heard = 0;
  sender.cache->set_insert_listener([&](const CachePlan& p, const CachedAnswer& a, const std::vector<float>& v) {
    std::lock_guard lock(mu);
    heard.emplace_back(p, a, v);
  });
  receiver.cache->set_insert_listener([&](const CachePlan&, const CachedAnswer&, const std::vector<float>&) {
    std::lock_guard lock(mu);
    ++receiver_heard;
  });
  EXPECT_FALSE(sender.cache->embedder_id().empty());
  EXPECT_EQ(sender.cache->embedder_id(), receiver.cache->embedder_id());
  sender.insert_and_wait(sender.plan(chat_body("What is the capital of France?")), "Paris.");
  std::tuple<CachePlan, CachedAnswer, std::vector<float>> first;
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(heard.size(), 1u);
    first = heard[0];
  }
  EXPECT_EQ(std::get<1>(first).content, "Paris.");
  ASSERT_EQ(std::get<2>(first).size(), 64u);

  auto wait_inserts = [&](double n) {
    for (int i = 0; i < 500 && receiver.counter("tidegate_cache_inserts_total") < n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(receiver.counter("tidegate_cache_inserts_total"), n);
  };
  const auto calls = receiver.embedder->calls.load();
  EXPECT_TRUE(receiver.cache->insert_from_peer(std::get<0>(first), std::get<1>(first), std::get<2>(first)));
  wait_inserts(1);
  EXPECT_EQ(receiver.embedder->calls.load(), calls);  // stored from the sender's vector
  const auto hit = receiver.lookup(receiver.plan(chat_body("what is the capital of france")));
  ASSERT_EQ(hit.status, CacheStatus::kHit);
  EXPECT_EQ(hit.answer.content, "Paris.");

  const auto cats = receiver.plan(chat_body("Tell me a joke about cats"));
  const auto before = receiver.embedder->calls.load();
  EXPECT_FALSE(receiver.cache->insert_from_peer(cats, CachedAnswer{"Meow.", "stop", 1, 1}, std::vector<float>(3, 0.5f)));
  wait_inserts(2);
  EXPECT_GT(receiver.embedder->calls.load(), before);  // a vector of another size: embedded here
  EXPECT_EQ(receiver.lookup(cats).answer.content, "Meow.");
  std::lock_guard lock(mu);
  EXPECT_EQ(receiver_heard, 0);  // a peer's insert is not sent back out
  EXPECT_EQ(heard.size(), 1u);
}
