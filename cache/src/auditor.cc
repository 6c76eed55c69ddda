#include "auditor.h"

#include <boost/json.hpp>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <filesystem>
#include <mutex>

#include "audit_book.h"
#include "tidegate/cache/calibration.h"
#include "tidegate/common/log.h"

namespace tidegate::cache {
namespace {

using Clock = std::chrono::steady_clock;

// What an audit needs once the model has answered.
struct AuditCase {
  std::string model, scope_key, kind;
  double score = 0;
  std::uint64_t entry_id = 0;
  RequestView::Endpoint endpoint = RequestView::Endpoint::kChat;
  std::string cached;  // the answer that was served
};

// The fresh answer's text (choice 0), or empty when the body is not a usable completion.
std::string fresh_content(const std::string& body, RequestView::Endpoint endpoint) {
  boost::system::error_code ec;
  const auto v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return {};
  const auto* choices = v.as_object().if_contains("choices");
  if (!choices || !choices->is_array() || choices->as_array().empty()) return {};
  const auto* choice = choices->as_array()[0].if_object();
  if (!choice) return {};
  const boost::json::value* text = nullptr;
  if (endpoint == RequestView::Endpoint::kCompletions) {
    text = choice->if_contains("text");
  } else if (const auto* msg = choice->if_contains("message"); msg && msg->is_object()) {
    text = msg->as_object().if_contains("content");
  }
  return text && text->is_string() ? std::string(text->as_string()) : std::string();
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0;  // the embedders return unit vectors
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) dot += static_cast<double>(a[i]) * b[i];
  return dot;
}

// The false-hit rate this pool was configured to accept, if any.
std::optional<double> bound_for(const CacheConfig& c, const std::string& model) {
  const auto it = c.models.find(model);
  if (it != c.models.end()) {
    if (it->second.max_false_hit_rate) return it->second.max_false_hit_rate;
    if (it->second.threshold) return std::nullopt;
  }
  return c.max_false_hit_rate;
}

}  // namespace

struct Auditor::Core {
  Core(std::shared_ptr<const CacheConfig> c, prometheus::Registry& r, encoder::EmbedBatcher& b)
      : config(std::move(c)),
        cfg(config->audit),
        book(cfg.max_scopes),
        batcher(&b),
        outcomes(prometheus::BuildCounter()
                     .Name("tidegate_cache_audits_total")
                     .Help("Audits of cache hits by outcome: correct, false_hit, dropped_busy|error|timeout|shutdown")
                     .Register(r)),
        rate(prometheus::BuildGauge()
                 .Name("tidegate_cache_audit_false_hit_rate")
                 .Help("Audited false-hit rate of cache hits (false hits / judged audits, kept across restarts)")
                 .Register(r)),
        upper(prometheus::BuildGauge()
                  .Name("tidegate_cache_audit_false_hit_rate_upper")
                  .Help("One-sided Clopper-Pearson upper bound on the audited false-hit rate (verifier.confidence)")
                  .Register(r)),
        judged(prometheus::BuildGauge()
                   .Name("tidegate_cache_audit_judged")
                   .Help("Audits the answer judge decided (kept across restarts)")
                   .Register(r)),
        bound(prometheus::BuildGauge()
                  .Name("tidegate_cache_max_false_hit_rate")
                  .Help("The false-hit rate a pool is configured to accept (max_false_hit_rate)")
                  .Register(r)),
        in_flight_gauge(prometheus::BuildGauge()
                            .Name("tidegate_cache_audits_in_flight")
                            .Help("Audits waiting on the model")
                            .Register(r)
                            .Add({})),
        tightened(prometheus::BuildGauge()
                      .Name("tidegate_cache_audit_tightened_scopes")
                      .Help("Scopes whose decision audits have tightened")
                      .Register(r)
                      .Add({})),
        similarity(prometheus::BuildHistogram()
                       .Name("tidegate_cache_audit_answer_similarity")
                       .Help("Cosine of the cached and the fresh answer of audited hits")
                       .Register(r)
                       .Add({}, prometheus::Histogram::BucketBoundaries{0.3, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95,
                                                                         0.99})) {
    for (const auto& [name, m] : config->models)
      if (auto b = bound_for(*config, name)) bound.Add({{"model", name}}).Set(*b);
  }

  void count(const std::string& model, const char* outcome) {
    outcomes.Add({{"model", model}, {"outcome", outcome}}).Increment();
  }
  void publish(const std::string& model, const AuditCounts& c) {
    if (c.judged == 0) return;
    const double n = static_cast<double>(c.judged);
    rate.Add({{"model", model}}).Set(static_cast<double>(c.false_hits) / n);
    upper.Add({{"model", model}}).Set(clopper_pearson_upper(c.false_hits, c.judged, config->verifier.confidence));
    judged.Add({{"model", model}}).Set(n);
    if (auto b = bound_for(*config, model)) bound.Add({{"model", model}}).Set(*b);
  }
  // The audit is over (judged or dropped): frees its slot.
  void finish(const AuditCase& c, const char* outcome) {
    count(c.model, outcome);
    std::lock_guard lock(mu);
    --in_flight;
    in_flight_gauge.Set(static_cast<double>(in_flight));
  }
  void dropped(const AuditCase& c, const char* outcome, const std::string& why) {
    log::warn("cache.audit_dropped", {{"model", c.model}, {"outcome", outcome}, {"error", why}});
    finish(c, outcome);
  }
  void judge(const AuditCase& c, double sim) {
    const bool correct = sim >= cfg.judge_threshold;
    const auto counts = book.record(c.model, c.scope_key, c.kind, c.score, correct);
    similarity.Observe(sim);
    publish(c.model, counts);
    tightened.Set(static_cast<double>(book.tightened_scopes()));
    if (!correct)
      log::warn("cache.audit_false_hit", {{"model", c.model}, {"entry", c.entry_id}, {"answer_similarity", sim},
                                          {"score", c.score}, {"kind", c.kind}});
    finish(c, correct ? "correct" : "false_hit");
  }
  void answered(const std::shared_ptr<Core>& self, const AuditCase& c, const AuditResponse& r);

  const std::shared_ptr<const CacheConfig> config;
  const AuditConfig cfg;
  AuditBook book;
  std::mutex submit_mu;
  encoder::EmbedBatcher* batcher;  // null once shut down; guarded by submit_mu
  mutable std::mutex mu;  // guards the fields below
  AuditFetch fetch;       // null once shut down
  double credit = 0;  // sampling: one audit each time it reaches 1
  std::size_t in_flight = 0;
  prometheus::Family<prometheus::Counter>& outcomes;
  prometheus::Family<prometheus::Gauge>& rate;
  prometheus::Family<prometheus::Gauge>& upper;
  prometheus::Family<prometheus::Gauge>& judged;
  prometheus::Family<prometheus::Gauge>& bound;
  prometheus::Gauge& in_flight_gauge;
  prometheus::Gauge& tightened;
  prometheus::Histogram& similarity;
};

void Auditor::Core::answered(const std::shared_ptr<Core>& self, const AuditCase& c, const AuditResponse& r) {
  if (r.outcome == AuditResponse::Outcome::kTimeout) return dropped(c, "dropped_timeout", r.error);
  if (r.outcome != AuditResponse::Outcome::kAnswered) return dropped(c, "dropped_error", r.error);
  if (r.status != 200) return dropped(c, "dropped_error", "status " + std::to_string(r.status));
  auto fresh = fresh_content(r.body, c.endpoint);
  if (fresh.empty()) return dropped(c, "dropped_error", "no answer text in the model's reply");
  // The judge embeds both answers on the encoder's threads (batched with lookups).
  struct Pair {
    std::mutex mu;
    std::vector<float> v[2];
    int left = 2;
    std::string error;
  };
  auto pair = std::make_shared<Pair>();
  auto on_vector = [self, c, pair](int i, std::vector<float> v, std::exception_ptr e) {
    std::lock_guard lock(pair->mu);
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        pair->error = x.what();
      } catch (...) {
        pair->error = "embedding failed";
      }
    }
    pair->v[i] = std::move(v);
    if (--pair->left > 0) return;
    if (!pair->error.empty() || pair->v[0].empty() || pair->v[0].size() != pair->v[1].size())
      return self->dropped(c, "dropped_error", "judge: " + (pair->error.empty() ? "bad vectors" : pair->error));
    self->judge(c, cosine(pair->v[0], pair->v[1]));
  };
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(config->embedder.timeout_s));
  // Held across submit, so shutdown() waits for it and no one calls the batcher afterwards. Its
  // own lock: a refused submit calls back at once, and finish() takes `mu`.
  std::lock_guard lock(submit_mu);
  if (!batcher) return finish(c, "dropped_shutdown");
  batcher->submit(c.cached, deadline, [on_vector](std::vector<float> v, std::exception_ptr e) { on_vector(0, std::move(v), e); });
  batcher->submit(std::move(fresh), deadline,
                  [on_vector](std::vector<float> v, std::exception_ptr e) { on_vector(1, std::move(v), e); });
}

Auditor::Auditor(std::shared_ptr<const CacheConfig> config, prometheus::Registry& registry, encoder::EmbedBatcher& batcher)
    : core_(std::make_shared<Core>(std::move(config), registry, batcher)) {}

Auditor::~Auditor() { shutdown(); }

void Auditor::set_fetch(AuditFetch fetch) {
  std::lock_guard lock(core_->mu);
  core_->fetch = std::move(fetch);
}

void Auditor::offer(const CachePlan& plan, const LookupResult& hit, const std::string& kind, double score,
                    RequestView::Endpoint endpoint, const boost::json::object& body) {
  auto& core = *core_;
  if (core.cfg.fraction <= 0) return;
  AuditFetch fetch;
  {
    std::lock_guard lock(core.mu);
    if (!core.fetch) return;
    core.credit += core.cfg.fraction;
    if (core.credit < 1) return;
    core.credit -= 1;
    if (core.in_flight >= core.cfg.max_in_flight) {
      core.count(plan.model, "dropped_busy");
      return;
    }
    ++core.in_flight;
    core.in_flight_gauge.Set(static_cast<double>(core.in_flight));
    fetch = core.fetch;
  }
  AuditCase c{plan.model, plan.scope_key, kind, score, hit.entry_id, endpoint, hit.answer.content};
  AuditRequest req;
  req.path = endpoint == RequestView::Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
  req.model = plan.model;
  req.tenant = plan.tenant;
  // The client's request again, answered whole: the judge reads one body, not a stream.
  auto copy = body;
  copy["stream"] = false;
  copy.erase("stream_options");
  req.body = boost::json::serialize(copy);
  auto self = core_;
  try {
    fetch(req, core.cfg.timeout_s, [self, c](AuditResponse r) {
      try {
        self->answered(self, c, r);
      } catch (const std::exception& e) {  // never past here: an audit only ever counts
        self->dropped(c, "dropped_error", e.what());
      }
    });
  } catch (const std::exception& e) {
    core.dropped(c, "dropped_error", e.what());
  }
}

bool Auditor::refuses(const std::string& scope_key, const std::string& kind, double score) const {
  return core_->book.refuses(scope_key, kind, score);
}

boost::json::object Auditor::stats() const {
  const auto& core = *core_;
  boost::json::object o = core.book.stats();
  o["fraction"] = core.cfg.fraction;
  o["max_in_flight"] = core.cfg.max_in_flight;
  o["judge_threshold"] = core.cfg.judge_threshold;
  o["confidence"] = core.config->verifier.confidence;
  {
    std::lock_guard lock(core.mu);
    o["in_flight"] = core.in_flight;
    o["enabled"] = core.cfg.fraction > 0 && core.fetch != nullptr;
  }
  boost::json::object models;
  for (const auto& [name, c] : core.book.models()) {
    boost::json::object m{{"judged", c.judged}, {"false_hits", c.false_hits}};
    if (c.judged > 0) {
      m["false_hit_rate"] = static_cast<double>(c.false_hits) / static_cast<double>(c.judged);
      m["false_hit_rate_upper"] = clopper_pearson_upper(c.false_hits, c.judged, core.config->verifier.confidence);
    }
    if (auto b = bound_for(*core.config, name)) m["max_false_hit_rate"] = *b;
    models[name] = std::move(m);
  }
  o["models"] = std::move(models);
  return o;
}

std::string Auditor::load(const std::string& dir) {
  const auto problem = load_audit_book(core_->book, (std::filesystem::path(dir) / "audit.json").string());
  for (const auto& [model, counts] : core_->book.models()) core_->publish(model, counts);
  core_->tightened.Set(static_cast<double>(core_->book.tightened_scopes()));
  return problem.value_or("");
}

bool Auditor::save(const std::string& dir, std::string* error) {
  return save_audit_book(core_->book, (std::filesystem::path(dir) / "audit.json").string(), error);
}

void Auditor::shutdown() {
  {
    std::lock_guard lock(core_->mu);
    core_->fetch = nullptr;
  }
  std::lock_guard lock(core_->submit_mu);
  core_->batcher = nullptr;
}

}  // namespace tidegate::cache
