#pragma once
// Rate limits on the data path (ratelimit/): checked on arrival, before the cache and the
// budget; a refusal is the failure table's 429 rate_limit_exceeded with Retry-After. Tokens are
// charged from the final usage of requests a replica answered (a cache hit uses no model tokens).
#include <functional>
#include <memory>

#include "tidegate/gateway/gateway.h"
#include "tidegate/ratelimit/limiter.h"

namespace tidegate::app {

class RateLimitFilter final : public gateway::RequestFilter {
 public:
  // `clock` returns Unix seconds (windows are UTC minutes).
  RateLimitFilter(std::shared_ptr<ratelimit::RateLimiter> limiter, std::function<double()> clock)
      : limiter_(std::move(limiter)), clock_(std::move(clock)) {}

  bool reads_request_body() const override { return false; }
  void pre_forward(const std::shared_ptr<gateway::RequestContext>& ctx, Done done) override;
  void on_complete(const gateway::RequestContext& ctx) override;

 private:
  std::shared_ptr<ratelimit::RateLimiter> limiter_;
  std::function<double()> clock_;
};

}  // namespace tidegate::app
