// The request path of the semantic cache: a request's plan, and a lookup through its tiers
// (exact text, candidates, guards, the verifier's calibrated decision, audits' refusals) to one
// answer, given once, by a worker or by the deadline, whichever comes first. The store's life
// (load, inserts, erasures, maintenance) is in semantic_cache_impl.cc.
#include "semantic_cache_impl.h"

#include "tidegate/cache/policy.h"
#include "tidegate/common/log.h"
#include "tidegate/encoder/embed_batcher.h"

namespace tidegate::cache {
namespace {

LookupResult bypass_result(std::string reason) {
  LookupResult r;
  r.status = CacheStatus::kBypass;
  r.reason = std::move(reason);
  return r;
}

}  // namespace

struct SemanticCacheImpl::LookupState {
  std::function<void(LookupResult)> done;
  std::string model;  // the metric's label
  Clock::time_point deadline;
  std::atomic<bool> fired{false};
  // Returns false when the answer was already given (by the worker or the deadline watch).
  bool fire(LookupResult r, CacheMetrics& metrics) {
    if (fired.exchange(true)) return false;
    metrics.lookup(r.status, r.reason, model);
    done(std::move(r));
    return true;
  }
};

CachePlan SemanticCacheImpl::plan(const RequestView& request) const {
  auto p = make_plan(*config_, request);
  if (stopped_) {
    p.read = p.write = false;
    p.status_without_hit = CacheStatus::kBypass;
    p.reason = "shutdown";
  }
  // Requests that never reach lookup() are counted here, once per request.
  if (!p.read) {
    if (p.status_without_hit == CacheStatus::kBypass) ++bypasses_;
    metrics_.lookup(p.status_without_hit, p.reason, p.model);
  }
  return p;
}

void SemanticCacheImpl::lookup(const CachePlan& plan, Clock::time_point deadline,
                               std::function<void(LookupResult)> done) {
  auto state = std::make_shared<LookupState>();
  state->done = std::move(done);
  state->model = plan.model;
  if (!plan.read) return fail(state, "not-readable");
  if (stopped_) return fail(state, "shutdown");
  deadline = std::min(deadline, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(config_->lookup_timeout_s)));
  // The batcher answers at the deadline too; this also covers time queued for the search.
  state->deadline = deadline;
  // Exact tier: the same normalised text in the same scope is a hit without embedding.
  if (config_->exact_tier) {
    const auto now_ms = now_unix_ms();
    auto exact = store_.exact(plan.scope_key, plan.text, now_ms);
    const bool refused = exact && auditor_->refuses(plan.scope_key, decision_kind(plan.model), 1.0);
    if (refused) metrics_.tier("audit", "refused");  // audits found this scope wrong even here
    if (exact && !refused && exact->entry.tenant == plan.tenant && exact->entry.model == plan.model) {
      metrics_.tier("exact", "hit");
      ++exact_hits_;
      // `done` runs on a cache worker, as for every other lookup.
      const bool queued = workers_.post(
          [this, state, now_ms, m = std::move(*exact)](bool stopping) {
            if (stopping) return fail(state, "shutdown");
            finish(state, LookupResult{}, m, now_ms);
          },
          config_->max_queue);
      if (!queued) fail(state, stopped_ ? "shutdown" : "overloaded");
      return;
    }
  }
  watch_.at(deadline, [this, state] {
    if (state->fired.load()) return;
    ++timeouts_;
    fail(state, "timeout");
  });
  const auto t0 = Clock::now();
  batcher_->submit(plan.text, deadline, [this, state, plan, t0](std::vector<float> v, std::exception_ptr error) {
    if (state->fired.load()) return;
    if (error) return embed_failed(state, error);
    const auto embed_s = seconds_since(t0);
    // Search on our own workers: the batcher's threads are for the encoder.
    const bool queued = workers_.post(
        [this, state, plan, embed_s, v = std::move(v)](bool stopping) mutable {
          if (state->fired.load()) return;
          if (stopping) return fail(state, "shutdown");
          run_lookup(state, plan, std::move(v), embed_s);
        },
        config_->max_queue);
    if (!queued) fail(state, stopped_ ? "shutdown" : "overloaded");
  });
}

void SemanticCacheImpl::fail(const std::shared_ptr<LookupState>& state, const char* reason) {
  if (state->fire(bypass_result(reason), metrics_)) ++bypasses_;
}

void SemanticCacheImpl::embed_failed(const std::shared_ptr<LookupState>& state, std::exception_ptr error) {
  const char* reason = "embedder-error";
  std::string what;
  try {
    std::rethrow_exception(error);
  } catch (const encoder::EmbedBatcherError& e) {
    switch (e.reason()) {
      case encoder::EmbedBatcherError::Reason::kDeadline: reason = "timeout"; break;
      case encoder::EmbedBatcherError::Reason::kOverloaded: reason = "overloaded"; break;
      case encoder::EmbedBatcherError::Reason::kShutdown: reason = "shutdown"; break;
    }
    what = e.what();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown error";
  }
  if (std::string_view(reason) == "embedder-error") ++embed_errors_;
  if (std::string_view(reason) == "timeout") ++timeouts_;
  if (state->fire(bypass_result(reason), metrics_)) {
    ++bypasses_;
    if (std::string_view(reason) == "embedder-error") log::warn("cache.embed_failed", {{"error", what}});
  }
}

void SemanticCacheImpl::run_lookup(const std::shared_ptr<LookupState>& state, const CachePlan& plan,
                                   std::vector<float> v, double embed_s) {
  LookupResult r;
  if (v.size() != embedder_->dim()) {
    if (state->fire(bypass_result("embedder-error"), metrics_)) ++bypasses_;
    return;
  }
  r.embed_s = embed_s;
  const auto t1 = Clock::now();
  const auto now_ms = now_unix_ms();
  const Calibration* calibration = verifier_ ? config_->calibration_for(plan.model) : nullptr;
  std::optional<Match> match, best;
  try {
    if (calibration) {
      match = verified_match(plan, v.data(), now_ms, *calibration, state->deadline, r);
    } else {
      best = store_.best(plan.scope_key, v.data(), now_ms);
      r.search_s = seconds_since(t1);
      const bool hit = best && best->similarity >= config_->threshold_for(plan.model) &&
                       best->entry.tenant == plan.tenant && best->entry.model == plan.model &&
                       (!config_->lexical_guard || lexical_guard(plan.text, best->entry.text));
      if (hit) match = best;
      if (best) r.similarity = best->similarity;  // the best below threshold too, for logs
      if (config_->verifier_needed()) metrics_.tier("cosine", hit ? "hit" : "miss");
    }
  } catch (const std::exception& e) {  // a CUDA error on a GPU index: fail open
    if (state->fire(bypass_result("search-error"), metrics_)) {
      ++bypasses_;
      log::warn("cache.search_failed", {{"error", e.what()}});
    }
    return;
  }
  // Audits that found this scope's hits wrong at or above this score refuse it (README "Online audits").
  if (match && auditor_->refuses(plan.scope_key, decision_kind(plan.model),
                                 r.probability >= 0 ? r.probability : match->similarity)) {
    metrics_.tier("audit", "refused");
    match.reset();
  }
  recent_.put(vector_key(plan), std::move(v));
  metrics_.embed_seconds.Observe(embed_s);
  metrics_.search_seconds.Observe(r.search_s);
  finish(state, std::move(r), match, now_ms);
}

std::optional<Match> SemanticCacheImpl::verified_match(const CachePlan& plan, const float* v, std::int64_t now_ms,
                                                       const Calibration& calibration, Clock::time_point deadline,
                                                       LookupResult& r) {
  const auto& vc = config_->verifier;
  const auto t1 = Clock::now();
  auto found = store_.candidates(plan.scope_key, v, vc.candidates, static_cast<float>(vc.floor), now_ms);
  r.search_s = seconds_since(t1);
  if (!found.empty()) r.similarity = found.front().similarity;
  std::vector<Match> kept;
  for (auto& m : found)
    if (m.entry.tenant == plan.tenant && m.entry.model == plan.model &&
        (!config_->lexical_guard || lexical_guard(plan.text, m.entry.text, vc.guards)))
      kept.push_back(std::move(m));
  if (found.empty()) {
    metrics_.tier("candidates", "none");
    return std::nullopt;
  }
  if (kept.empty()) {
    metrics_.tier("guard", "rejected");
    return std::nullopt;
  }
  std::vector<std::string> texts;
  for (const auto& m : kept) texts.push_back(m.entry.text);
  const auto t2 = Clock::now();
  const auto budget = t2 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(vc.timeout_s));
  const auto verify_deadline = std::min(deadline, budget);
  std::vector<float> p;
  try {
    p = verifier_->verify(plan.text, texts, verify_deadline);
    if (p.size() != texts.size()) throw std::runtime_error("verifier returned " + std::to_string(p.size()) + " scores");
  } catch (const std::exception& e) {
    // Fail open: a verifier that errs or runs out of time is a miss, never a hit.
    const bool late = Clock::now() >= verify_deadline;
    metrics_.tier("verifier", late ? "timeout" : "error");
    if (verifier_failures_.fetch_add(1) == 0 || !late) log::warn("cache.verifier_failed", {{"error", e.what()}});
    return std::nullopt;
  }
  metrics_.verify_seconds.Observe(seconds_since(t2));
  // The calibrated score of each candidate: its verifier probability combined with its cosine.
  std::vector<double> score(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) score[i] = combined_score(vc.combine, kept[i].similarity, p[i]);
  std::size_t best = 0;
  for (std::size_t i = 1; i < p.size(); ++i)
    if (score[i] > score[best]) best = i;
  r.probability = static_cast<float>(score[best]);
  if (!(score[best] >= calibration.threshold)) {
    metrics_.tier("verifier", "rejected");
    ++verifier_rejects_;
    return std::nullopt;
  }
  metrics_.tier("verifier", "hit");
  metrics_.hit_probability.Observe(score[best]);
  ++verified_hits_;
  r.similarity = kept[best].similarity;
  return std::move(kept[best]);
}

const char* SemanticCacheImpl::decision_kind(const std::string& model) const {
  return verifier_ && config_->calibration_for(model) ? "verifier" : "cosine";
}

void SemanticCacheImpl::audit(const CachePlan& plan, const LookupResult& hit, RequestView::Endpoint endpoint,
                              const boost::json::object& body) {
  if (hit.status != CacheStatus::kHit || stopped_) return;
  // The score the hit was decided on: the verifier's (combined) score, else the cosine (1 for
  // an exact-tier hit).
  const double score = hit.probability >= 0 ? hit.probability : hit.similarity;
  try {
    auditor_->offer(plan, hit, decision_kind(plan.model), score, endpoint, body);
  } catch (const std::exception& e) {  // the request path: an audit that cannot start is skipped
    log::warn("cache.audit_failed", {{"error", e.what()}});
  }
}

void SemanticCacheImpl::finish(const std::shared_ptr<LookupState>& state, LookupResult r,
                               const std::optional<Match>& match, std::int64_t now_ms) {
  if (match) {
    r.status = CacheStatus::kHit;
    r.answer = match->entry.answer;
    r.entry_id = match->entry.id;
    r.similarity = match->similarity;
    r.age_s = static_cast<double>(now_ms - match->entry.created_ms) / 1000.0;
  } else {
    r.status = CacheStatus::kMiss;
  }
  // Claim the answer before counting, so a lookup the deadline already answered is not
  // counted twice, and counters are final by the time `done` runs.
  if (state->fired.exchange(true)) return;
  if (match) {
    store_.touch(match->entry.id, now_ms);
    ++hits_;
    metrics_.lookup(CacheStatus::kHit, "", state->model);
    metrics_.hit_similarity.Observe(match->similarity);
    metrics_.prompt_tokens_saved.Increment(static_cast<double>(r.answer.prompt_tokens));
    metrics_.completion_tokens_saved.Increment(static_cast<double>(r.answer.completion_tokens));
  } else {
    ++misses_;
    metrics_.lookup(CacheStatus::kMiss, "", state->model);
  }
  state->done(std::move(r));
}

}  // namespace tidegate::cache
