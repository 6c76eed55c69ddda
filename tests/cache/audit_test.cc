// Online audits through the whole cache (issue 19): sampling, the judge, dropped audits, the
// bound on audits in flight, per-scope tightening and its survival across a restart. The model
// is a fake AuditFetch that answers from a table (or fails, times out, or holds its answer).
#include <fstream>
#include <mutex>
#include <thread>

#include "cache_fixture.h"
#include "tidegate/cache/calibration.h"

using namespace tidegate::cache;
using namespace tidegate::cache::fakes;

namespace {

const std::string kQuestion = "what is the capital city of france";
const std::string kParaphrase = "what is the capital city of france please";  // cosine ~0.93 here
const std::string kAnswer = "paris is the capital of france";

// The model behind the audits.
struct FakeModel {
  enum class Mode { kAnswer, kStatus500, kTimeout, kError, kHold };
  std::mutex mu;
  Mode mode = Mode::kAnswer;
  std::map<std::string, std::string> answers;  // user text -> fresh answer
  std::vector<AuditRequest> requests;
  std::vector<std::function<void(AuditResponse)>> held;

  AuditFetch fetch() {
    return [this](const AuditRequest& r, double, std::function<void(AuditResponse)> done) {
      std::unique_lock lock(mu);
      requests.push_back(r);
      AuditResponse resp;
      switch (mode) {
        case Mode::kStatus500:
          resp.outcome = AuditResponse::Outcome::kAnswered;
          resp.status = 500;
          resp.body = R"({"error":{"message":"engine failed"}})";
          break;
        case Mode::kTimeout: resp.outcome = AuditResponse::Outcome::kTimeout; resp.error = "timeout"; break;
        case Mode::kError: resp.outcome = AuditResponse::Outcome::kError; resp.error = "connection refused"; break;
        case Mode::kHold: held.push_back(std::move(done)); return;
        case Mode::kAnswer: resp = answer(r); break;
      }
      lock.unlock();
      done(std::move(resp));
    };
  }
  AuditResponse answer(const AuditRequest& r) {
    const auto body = boost::json::parse(r.body).as_object();
    const auto user = std::string(body.at("messages").as_array().back().as_object().at("content").as_string());
    AuditResponse resp;
    resp.outcome = AuditResponse::Outcome::kAnswered;
    resp.status = 200;
    const auto it = answers.find(user);
    boost::json::object msg{{"role", "assistant"}, {"content", it == answers.end() ? "no idea" : it->second}};
    resp.body = boost::json::serialize(boost::json::object{
        {"choices", boost::json::array{boost::json::object{{"index", 0}, {"message", msg}, {"finish_reason", "stop"}}}}});
    return resp;
  }
  void release_all() {
    std::vector<std::function<void(AuditResponse)>> h;
    {
      std::lock_guard lock(mu);
      h.swap(held);
    }
    for (auto& done : h) {
      AuditResponse r;
      r.outcome = AuditResponse::Outcome::kAnswered;
      r.status = 200;
      r.body = R"({"choices":[{"index":0,"message":{"role":"assistant","content":")" + kAnswer + R"("},"finish_reason":"stop"}]})";
      done(std::move(r));
    }
  }
  std::size_t sent() {
    std::lock_guard lock(mu);
    return requests.size();
  }
};

CacheConfig audit_config(double fraction, std::size_t max_in_flight = 4) {
  CacheConfig c;
  c.threshold = 0.8;  // the paraphrase hits on cosine alone
  c.lexical_guard = false;
  c.lookup_timeout_s = 5;
  c.snapshot_interval_s = 3600;
  c.audit.fraction = fraction;
  c.audit.max_in_flight = max_in_flight;
  return c;
}

struct AuditedCache : CacheHarness {
  FakeModel model;
  explicit AuditedCache(CacheConfig cfg) : CacheHarness(std::move(cfg)) { cache->set_audit_fetch(model.fetch()); }

  // A lookup of `text`; a hit is offered to the audits, as the gateway's cache filter does.
  LookupResult ask(const std::string& text) {
    const auto body = chat_body(text);
    const auto p = plan(body);
    auto r = lookup(p);
    if (r.status == CacheStatus::kHit) cache->audit(p, r, RequestView::Endpoint::kChat, body);
    return r;
  }
  void store_question() { insert_and_wait(plan(chat_body(kQuestion)), kAnswer); }
  double outcome(const std::string& o) { return counter("tidegate_cache_audits_total", "outcome=" + o); }
  double gauge(const std::string& name) const {
    for (const auto& fam : registry.Collect())
      if (fam.name == name && !fam.metric.empty()) return fam.metric.front().gauge.value;
    return -1;
  }
  // Audits are judged on the encoder's threads: wait (bounded) until `n` outcomes are counted.
  void wait_outcomes(double n) {
    for (int i = 0; i < 1000; ++i) {
      if (counter("tidegate_cache_audits_total") >= n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
};

}  // namespace

TEST(CacheAudit, EveryHitAuditedAtFractionOneJudgedRightOrWrong) {
  AuditedCache h(audit_config(1.0));
  h.model.answers[kQuestion] = kAnswer;                          // the cached answer holds for the question
  h.model.answers[kParaphrase] = "lyon has the best food in europe";  // ...and not for the "paraphrase"
  h.store_question();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(h.ask(kQuestion).status, CacheStatus::kHit);
  h.wait_outcomes(3);
  const auto hit = h.ask(kParaphrase);
  ASSERT_EQ(hit.status, CacheStatus::kHit);
  EXPECT_LT(hit.similarity, 1.0f);
  h.wait_outcomes(4);
  EXPECT_EQ(h.outcome("correct"), 3);
  EXPECT_EQ(h.outcome("false_hit"), 1);
  ASSERT_EQ(h.model.sent(), 4u);
  // What the model was asked: the client's request again, whole, not streamed.
  const auto sent = boost::json::parse(h.model.requests.back().body).as_object();
  EXPECT_EQ(sent.at("stream"), false);
  EXPECT_EQ(h.model.requests.back().path, "/v1/chat/completions");
  // The audited rate and its one-sided upper bound (Clopper-Pearson, verifier.confidence).
  EXPECT_DOUBLE_EQ(h.gauge("tidegate_cache_audit_false_hit_rate"), 0.25);
  EXPECT_DOUBLE_EQ(h.gauge("tidegate_cache_audit_false_hit_rate_upper"), clopper_pearson_upper(1, 4, 0.95));
  const auto stats = h.cache->stats().at("audit").as_object();
  EXPECT_EQ(stats.at("models").at("m").at("judged").as_uint64(), 4u);
  EXPECT_EQ(stats.at("models").at("m").at("false_hits").as_uint64(), 1u);
  EXPECT_EQ(stats.at("scopes_tightened").as_uint64(), 1u);

  // The scope's cut rose to the false hit's similarity: the paraphrase now misses, while the
  // question itself (similarity 1) is still served.
  EXPECT_EQ(h.ask(kParaphrase).status, CacheStatus::kMiss);
  EXPECT_EQ(h.counter("tidegate_cache_tier_total", "tier=audit"), 1);
  EXPECT_EQ(h.ask(kQuestion).status, CacheStatus::kHit);
  // Another tenant's scope has its own evidence: none.
  h.insert_and_wait(h.plan(chat_body(kQuestion), "t2"), kAnswer);
  EXPECT_EQ(h.lookup(h.plan(chat_body(kParaphrase), "t2")).status, CacheStatus::kHit);
}

TEST(CacheAudit, FractionSamplesExactlyThatShareOfHits) {
  AuditedCache h(audit_config(0.25));
  h.model.answers[kQuestion] = kAnswer;
  h.store_question();
  for (int i = 0; i < 12; ++i) ASSERT_EQ(h.ask(kQuestion).status, CacheStatus::kHit);
  h.wait_outcomes(3);
  EXPECT_EQ(h.model.sent(), 3u);
  EXPECT_EQ(h.outcome("correct"), 3);
}

TEST(CacheAudit, UpstreamErrorsAndTimeoutsAreDroppedCountedAndChangeNothing) {
  AuditedCache h(audit_config(1.0));
  h.store_question();
  h.model.mode = FakeModel::Mode::kStatus500;
  ASSERT_EQ(h.ask(kParaphrase).status, CacheStatus::kHit);
  h.model.mode = FakeModel::Mode::kError;
  ASSERT_EQ(h.ask(kParaphrase).status, CacheStatus::kHit);
  h.model.mode = FakeModel::Mode::kTimeout;
  ASSERT_EQ(h.ask(kParaphrase).status, CacheStatus::kHit);
  h.wait_outcomes(3);
  EXPECT_EQ(h.outcome("dropped_error"), 2);
  EXPECT_EQ(h.outcome("dropped_timeout"), 1);
  EXPECT_EQ(h.outcome("correct") + h.outcome("false_hit"), 0);
  EXPECT_EQ(h.cache->stats().at("audit").at("in_flight").as_uint64(), 0u);
  // A failed audit is no evidence: the decision is unchanged.
  EXPECT_EQ(h.ask(kParaphrase).status, CacheStatus::kHit);
}

TEST(CacheAudit, InFlightIsBoundedAndTheRestDroppedBusy) {
  AuditedCache h(audit_config(1.0, 2));
  h.model.mode = FakeModel::Mode::kHold;
  h.store_question();
  for (int i = 0; i < 6; ++i) ASSERT_EQ(h.ask(kQuestion).status, CacheStatus::kHit);  // never waits on audits
  EXPECT_EQ(h.model.sent(), 2u);
  EXPECT_EQ(h.outcome("dropped_busy"), 4);
  EXPECT_EQ(h.gauge("tidegate_cache_audits_in_flight"), 2);
  h.model.mode = FakeModel::Mode::kAnswer;
  h.model.answers[kQuestion] = kAnswer;
  h.model.release_all();
  h.wait_outcomes(6);
  EXPECT_EQ(h.outcome("correct"), 2);
  ASSERT_EQ(h.ask(kQuestion).status, CacheStatus::kHit);  // a slot is free again
  h.wait_outcomes(7);
  EXPECT_EQ(h.model.sent(), 3u);
  EXPECT_EQ(h.outcome("correct"), 3);
}

TEST(CacheAudit, TighteningAndTheRateSurviveARestart) {
  TempDir dir;
  auto cfg = audit_config(1.0);
  cfg.data_dir = dir.path.string();
  {
    AuditedCache h(cfg);
    h.model.answers[kParaphrase] = "lyon has the best food in europe";
    h.store_question();
    ASSERT_EQ(h.ask(kParaphrase).status, CacheStatus::kHit);
    h.wait_outcomes(1);
    ASSERT_EQ(h.outcome("false_hit"), 1);
    h.cache->shutdown();  // saves the audit book beside the snapshot
  }
  ASSERT_TRUE(std::filesystem::exists(dir.path / "audit.json"));
  AuditedCache h(cfg);
  // Read before any hit of this run: each one is audited, and its audit would add to the count.
  EXPECT_DOUBLE_EQ(h.gauge("tidegate_cache_audit_false_hit_rate"), 1.0);
  EXPECT_EQ(h.cache->stats().at("audit").at("models").at("m").at("judged").as_uint64(), 1u);
  EXPECT_EQ(h.ask(kParaphrase).status, CacheStatus::kMiss);
  EXPECT_EQ(h.ask(kQuestion).status, CacheStatus::kHit);
}

TEST(CacheAudit, AnswersArrivingAfterShutdownOnlyCount) {
  AuditedCache h(audit_config(1.0));
  h.model.mode = FakeModel::Mode::kHold;
  h.store_question();
  ASSERT_EQ(h.ask(kQuestion).status, CacheStatus::kHit);
  ASSERT_EQ(h.model.sent(), 1u);
  h.cache->shutdown();
  h.model.release_all();  // the encoder is gone: the audit is dropped, not judged
  EXPECT_EQ(h.outcome("dropped_shutdown"), 1);
  h.cache.reset();
}

TEST(CacheAudit, ACorruptAuditFileIsReportedAndTheCacheStarts) {
  TempDir dir;
  std::ofstream(dir.path / "audit.json") << "{\"version\":1,\"models\":";  // torn mid-write
  auto cfg = audit_config(1.0);
  cfg.data_dir = dir.path.string();
  AuditedCache h(cfg);
  const auto problems = h.cache->stats().at("persistence").at("load_problems").as_array();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(std::string(problems[0].as_string()).find("audit.json"), std::string::npos) << problems[0];
  EXPECT_TRUE(std::filesystem::exists(dir.path / "audit.json.corrupt"));
  h.model.answers[kQuestion] = kAnswer;
  h.store_question();
  EXPECT_EQ(h.ask(kQuestion).status, CacheStatus::kHit);  // audits start afresh
  h.wait_outcomes(1);
  EXPECT_EQ(h.outcome("correct"), 1);
}
