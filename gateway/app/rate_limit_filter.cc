#include "rate_limit_filter.h"

#include <algorithm>

namespace tidegate::app {
namespace {

constexpr const char* kAdmittedAt = "ratelimit.admitted_at";

ratelimit::Subject subject(const gateway::RequestContext& ctx) { return {ctx.key_name, ctx.tenant, ctx.model}; }

}  // namespace

void RateLimitFilter::pre_forward(const std::shared_ptr<gateway::RequestContext>& ctx, Done done) {
  const double t = clock_();
  const auto d = limiter_->admit(subject(*ctx), t);
  if (!d.allowed) return done(gateway::refusal(gateway::Refusal::kRateLimited, d.message, d.retry_after_s));
  ctx->extensions[kAdmittedAt] = std::make_shared<double>(t);  // tokens go to this minute
  done(std::nullopt);
}

void RateLimitFilter::on_complete(const gateway::RequestContext& ctx) {
  const auto it = ctx.extensions.find(kAdmittedAt);
  if (it == ctx.extensions.end() || ctx.local_reply) return;
  const auto tokens = std::max<std::int64_t>(0, ctx.prompt_tokens) + std::max<std::int64_t>(0, ctx.completion_tokens);
  limiter_->charge_tokens(subject(ctx), *std::static_pointer_cast<double>(it->second), tokens);
}

}  // namespace tidegate::app
