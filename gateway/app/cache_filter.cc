#include "cache_filter.h"

#include <cmath>
#include <cstdio>

namespace tidegate::app {
namespace {

std::string header(const gateway::RequestContext& ctx, const std::string& name) {
  const auto it = ctx.request_headers.find(name);
  return it == ctx.request_headers.end() ? std::string() : it->second;
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The plan travels with the request from pre_forward to on_complete.
struct PlanHolder {
  cache::CachePlan plan;
  cache::RequestView::Endpoint endpoint;
};

}  // namespace

void CacheFilter::pre_forward(const std::shared_ptr<gateway::RequestContext>& ctx, Done done) {
  const bool chat = ctx->path.rfind("/v1/chat/completions", 0) == 0;
  const bool completions = ctx->path.rfind("/v1/completions", 0) == 0;
  if ((!chat && !completions) || !ctx->body || !ctx->body->is_object()) return done(std::nullopt);
  if (audit_mark_ && audit_mark_->marks(*ctx)) {  // the cache's own audit: the model must answer it
    ctx->filter_state.get<CacheOutcome>().audit = true;
    ctx->attributes[kStatusField] = "audit";
    ctx->response_headers.emplace_back("x-tidegate-cache", "audit");
    return done(std::nullopt);
  }

  cache::RequestView view;
  view.endpoint = chat ? cache::RequestView::Endpoint::kChat : cache::RequestView::Endpoint::kCompletions;
  view.model = ctx->model;
  view.tenant = ctx->tenant;
  view.body = &ctx->body->as_object();
  view.cache_control = header(*ctx, "cache-control");
  view.cache_directive = header(*ctx, "x-tidegate-cache");
  if (const auto ttl = header(*ctx, "x-tidegate-cache-ttl"); !ttl.empty()) {
    char* end = nullptr;
    const double v = std::strtod(ttl.c_str(), &end);
    if (end && *end == '\0' && std::isfinite(v) && v >= 0) view.ttl_override_s = v;
  }
  auto plan = std::make_shared<PlanHolder>();
  plan->plan = cache_->plan(view);
  plan->endpoint = view.endpoint;
  // Shared: the lookup's callback and the audit after it hold the plan too, off the session's loop.
  const std::shared_ptr<const PlanHolder> holder = plan;
  ctx->filter_state.get<std::shared_ptr<const PlanHolder>>() = holder;
  if (!holder->plan.read) {
    ctx->filter_state.get<CacheOutcome>().status = holder->plan.status_without_hit;
    const auto status = std::string(cache::to_string(holder->plan.status_without_hit));
    ctx->attributes[kStatusField] = status;
    ctx->response_headers.emplace_back("x-tidegate-cache", status);
    return done(std::nullopt);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);  // the cache caps it lower
  cache_->lookup(holder->plan, deadline, [this, ctx, holder, done = std::move(done)](cache::LookupResult r) {
    auto& outcome = ctx->filter_state.get<CacheOutcome>();
    outcome.status = r.status;
    if (r.status != cache::CacheStatus::kHit) {
      const auto status = std::string(cache::to_string(r.status));
      ctx->attributes[kStatusField] = status;
      ctx->response_headers.emplace_back("x-tidegate-cache", status);
      return done(std::nullopt);
    }
    outcome.entry_id = r.entry_id;
    ctx->attributes[kStatusField] = "hit";
    ctx->attributes["cache.entry_id"] = std::to_string(r.entry_id);
    ctx->prompt_tokens = r.answer.prompt_tokens;
    ctx->completion_tokens = r.answer.completion_tokens;
    gateway::LocalReply reply;
    reply.reason = "cache_hit";
    const auto endpoint = holder->endpoint;
    if (ctx->stream) {
      reply.content_type = "text/event-stream";
      boost::json::object priced;
      if (ctx->client_wants_usage && price_hit_) priced["tidegate_cost_usd"] = price_hit_(*ctx);
      reply.body = cache::render_hit_sse(endpoint, ctx->model, r.answer, ctx->client_wants_usage,
                                         priced.empty() ? nullptr : &priced);
      reply.headers.emplace_back("Cache-Control", "no-cache");
    } else {
      reply.body = cache::render_hit_json(endpoint, ctx->model, r.answer);
    }
    reply.headers.emplace_back("x-tidegate-cache", "hit");
    reply.headers.emplace_back("x-tidegate-cache-similarity", fixed(r.similarity, 4));
    // The pair verifier's probability, when it decided the hit (issue 19).
    if (r.probability >= 0) reply.headers.emplace_back("x-tidegate-cache-probability", fixed(r.probability, 4));
    reply.headers.emplace_back("x-tidegate-cache-age", std::to_string(static_cast<long long>(std::floor(r.age_s))));
    reply.headers.emplace_back("x-tidegate-cache-entry", std::to_string(r.entry_id));
    const auto body = ctx->body;  // read before the session resumes with ctx on its loop
    done(std::move(reply));
    // After the client's answer is on its way: an audit (when sampled) runs in the background.
    cache_->audit(holder->plan, r, endpoint, body->as_object());
  });
}

void CacheFilter::on_complete(const gateway::RequestContext& ctx) {
  if (ctx.local_reply || ctx.status != 200 || !ctx.complete) return;
  const auto* holder = ctx.filter_state.find<std::shared_ptr<const PlanHolder>>();
  if (!holder || !*holder) return;
  const auto& plan = (*holder)->plan;
  if (!plan.write) return;
  if (ctx.finish_reason != "stop" && ctx.finish_reason != "length") return;  // cut or tool answers are not stored
  cache::CachedAnswer answer;
  answer.content = ctx.content;
  answer.finish_reason = ctx.finish_reason;
  answer.prompt_tokens = std::max<std::int64_t>(0, ctx.prompt_tokens);
  answer.completion_tokens = std::max<std::int64_t>(0, ctx.completion_tokens);
  cache_->insert(plan, std::move(answer));
}

}  // namespace tidegate::app
