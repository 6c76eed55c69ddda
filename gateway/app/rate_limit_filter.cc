#include "rate_limit_filter.h"

#include <algorithm>

namespace tidegate::app {
namespace {

// When the request was admitted (the slot exists only for admitted requests): its tokens are
// charged to that minute's window.
struct Admitted {
  double at = 0;
};

ratelimit::Subject subject(const gateway::RequestContext& ctx) { return {ctx.key_name, ctx.tenant, ctx.model}; }

}  // namespace

void RateLimitFilter::pre_forward(const std::shared_ptr<gateway::RequestContext>& ctx, Done done) {
  const double t = clock_();
  const auto d = limiter_->admit(subject(*ctx), t);
  if (!d.allowed) return done(gateway::refusal(gateway::Refusal::kRateLimited, d.message, d.retry_after_s));
  ctx->filter_state.get<Admitted>().at = t;
  done(std::nullopt);
}

void RateLimitFilter::on_complete(const gateway::RequestContext& ctx) {
  const auto* admitted = ctx.filter_state.find<Admitted>();
  if (!admitted || ctx.local_reply) return;
  const auto tokens = std::max<std::int64_t>(0, ctx.prompt_tokens) + std::max<std::int64_t>(0, ctx.completion_tokens);
  limiter_->charge_tokens(subject(ctx), admitted->at, tokens);
}

}  // namespace tidegate::app
