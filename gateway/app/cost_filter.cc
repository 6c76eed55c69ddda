#include "cost_filter.h"

#include <cstdio>

#include "cache_filter.h"

namespace tidegate::app {
namespace {

std::string usd(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.8f", v);
  return buf;
}

}  // namespace

struct CostFilter::State {
  std::uint64_t handle = 0;  // open ledger request (0: none)
  double cost = 0;           // settled so far (all attempts, or the cache lookup)
  bool hit_priced = false;   // a cache hit was charged (exactly once)
};

cost::RequestLabels labels_of(const gateway::RequestContext& ctx) {
  cost::RequestLabels l;
  l.model = ctx.model;
  l.tenant = ctx.tenant;
  l.key_id = ctx.key_name;
  l.tags = ctx.tags;
  return l;
}

cost::RequestLabels CostFilter::labels(const gateway::RequestContext& ctx) const {
  auto l = labels_of(ctx);
  l.audit = audit_mark_ && audit_mark_->marks(ctx);
  return l;
}

CostFilter::State& CostFilter::state(gateway::RequestContext& ctx) { return ctx.filter_state.get<State>(); }

CostFilter::State* CostFilter::find_state(const gateway::RequestContext& ctx) { return ctx.filter_state.find<State>(); }

void CostFilter::pre_forward(const std::shared_ptr<gateway::RequestContext>& ctx, Done done) {
  const auto decision = accounting_->check_budget(labels(*ctx), clock_());
  if (decision.allowed) return done(std::nullopt);
  gateway::LocalReply reply;
  reply.status = 429;
  reply.reason = "budget_exceeded";
  reply.body = cost::budget_error_body(decision);
  done(std::move(reply));
}

void CostFilter::on_attempt_start(gateway::RequestContext& ctx) {
  auto& s = state(ctx);
  settle(ctx, s);  // a retry: the failed attempt keeps what it cost
  s.handle = accounting_->request_started(labels(ctx), ctx.replica_id, clock_());
}

void CostFilter::on_attempt_end(gateway::RequestContext& ctx, bool success) {
  // The replica is done with this attempt: its cost is final (and reaches the access log).
  auto& s = state(ctx);
  settle(ctx, s);
  ctx.attributes["cost_usd"] = usd(s.cost);
}

void CostFilter::report_progress(const gateway::RequestContext& ctx, const State& s, double now) {
  if (ctx.prompt_tokens < 0 && ctx.completion_tokens < 0) return;  // nothing known yet
  accounting_->request_progress(s.handle, std::max<std::int64_t>(0, ctx.prompt_tokens),
                                std::max<std::int64_t>(0, ctx.completion_tokens), now,
                                std::max<std::int64_t>(0, ctx.cached_prompt_tokens));
}

void CostFilter::settle(const gateway::RequestContext& ctx, State& s) {
  if (!s.handle) return;
  const double now = clock_();
  report_progress(ctx, s, now);
  s.cost += accounting_->request_finished(s.handle, now);
  s.handle = 0;
}

void CostFilter::on_stream_event(gateway::RequestContext& ctx, boost::json::object* usage_chunk) {
  auto& s = state(ctx);
  if (!s.handle) return;
  if (!usage_chunk) return report_progress(ctx, s, clock_());
  // The usage chunk is the replica's last word: the request's cost is final now.
  settle(ctx, s);
  (*usage_chunk)["tidegate_cost_usd"] = s.cost;
  ctx.attributes["cost_usd"] = usd(s.cost);
}

void CostFilter::on_response_headers(gateway::RequestContext& ctx) {
  auto& s = state(ctx);
  if (ctx.local_reply) {
    const auto* cache = ctx.filter_state.find<CacheOutcome>();
    if (!cache || !cache->hit()) return;  // errors and refusals cost nothing
    price_hit(ctx);
  } else if (!ctx.stream) {
    settle(ctx, s);  // non-stream: the whole answer (and its usage) is in hand
  } else {
    return;  // stream heads go out before any token: the cost rides on the usage chunk
  }
  auto cost = usd(s.cost);
  ctx.response_headers.emplace_back("x-tidegate-cost-usd", cost);
  ctx.attributes["cost_usd"] = std::move(cost);
}

double CostFilter::price_hit(gateway::RequestContext& ctx) {
  auto& s = state(ctx);
  if (s.hit_priced) return s.cost;
  double saving = 0;  // the cache filter put the cached answer's usage in ctx
  s.cost = accounting_->cache_hit(labels(ctx), std::max<std::int64_t>(0, ctx.prompt_tokens),
                                  std::max<std::int64_t>(0, ctx.completion_tokens), clock_(), &saving);
  ctx.attributes["cache_saving_usd"] = usd(saving);
  s.hit_priced = true;
  return s.cost;
}

void CostFilter::on_complete(const gateway::RequestContext& ctx) {
  // Streams without a usage chunk for the client, broken streams and disconnects end here:
  // the replica time they used is still charged to them.
  if (auto* s = find_state(ctx)) settle(ctx, *s);
}

}  // namespace tidegate::app
