#pragma once
// Requests and tokens per minute, counted in fixed one-minute windows (UTC minutes, by Redis's
// clock when shared). A request is counted on arrival when every matching limit admits it; its
// tokens are charged from the final usage to the window it arrived in. Token limits therefore
// refuse the requests that arrive after a window's tokens ran out, not the one that crossed it.
//
// Shared (redis::SharedTotals given): every gateway's counts add up to one limit for the fleet,
// checked against sums cached locally (never waiting on Redis); while Redis is unreachable each
// gateway enforces its 1/N share. Local otherwise. Thread-safe.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tidegate/ratelimit/config.h"

namespace prometheus {
class Registry;
}
namespace tidegate::redis {
class Client;
class SharedTotals;
struct RedisConfig;
}  // namespace tidegate::redis

namespace tidegate::ratelimit {

// Who is asking: views into the request's context, valid for the call they are passed to.
struct Subject {
  std::string_view key_id;  // API key name
  std::string_view tenant;
  std::string_view model;
};

struct Decision {
  bool allowed = true;
  std::string scope;        // "tenant:acme"
  std::string limit;        // "requests_per_minute" / "tokens_per_minute"
  double limit_value = 0;
  double used = 0;          // in the current window, as this gateway sees the fleet
  double retry_after_s = 0; // until the window ends (at least 1)
  std::string message;      // names the limit, for the client
};

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // On arrival; counts the request when it is admitted. `t`: Unix seconds.
  virtual Decision admit(const Subject& subject, double t) = 0;
  // From the final usage, to the window of `t_admitted` (the `t` admit() was given).
  virtual void charge_tokens(const Subject& subject, double t_admitted, std::int64_t tokens) = 0;
};

// `shared` may be null (this gateway alone); `registry` may be null (no metrics).
std::shared_ptr<RateLimiter> make_rate_limiter(std::shared_ptr<const RateLimitConfig> config,
                                               std::shared_ptr<redis::SharedTotals> shared,
                                               prometheus::Registry* registry);

// The shared counts on Redis: keys <prefix>:rate_limits:<scope>/<rpm|tpm>/<minute>, kept two minutes.
std::shared_ptr<redis::SharedTotals> make_redis_windows(std::shared_ptr<redis::Client> client,
                                                        std::shared_ptr<const redis::RedisConfig> config,
                                                        prometheus::Registry* registry);

}  // namespace tidegate::ratelimit
