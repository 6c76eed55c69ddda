#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "tidegate/ratelimit/limiter.h"
#include "tidegate/redis/shared_totals.h"

namespace tidegate::ratelimit {
namespace {

constexpr double kWindowS = 60;

std::string count(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

// The scope a rule applies to for this subject ("tenant:acme"), if any.
std::optional<std::string> scope_of(const RateLimitRule& r, const Subject& s) {
  const std::string& value = r.kind == ScopeKind::kKey ? s.key_id : r.kind == ScopeKind::kTenant ? s.tenant : s.model;
  if (value.empty() || (r.match != "*" && r.match != value)) return std::nullopt;
  return std::string(to_string(r.kind)) + ":" + value;
}

class Limiter final : public RateLimiter {
 public:
  Limiter(std::shared_ptr<const RateLimitConfig> config, std::shared_ptr<redis::SharedTotals> shared,
          prometheus::Registry* registry)
      : config_(std::move(config)), shared_(std::move(shared)) {
    if (!registry) return;
    auto& f = prometheus::BuildCounter().Name("tidegate_rate_limit_rejections_total")
                  .Help("Requests refused with 429 rate_limit_exceeded, by limit and scope kind").Register(*registry);
    for (int l = 0; l < 2; ++l)
      for (int k = 0; k < 3; ++k)
        rejections_[l][k] = &f.Add({{"limit", l ? "tokens_per_minute" : "requests_per_minute"},
                                    {"scope_kind", to_string(static_cast<ScopeKind>(k))}});
  }

  Decision admit(const Subject& subject, double t) override {
    std::lock_guard lock(mu_);
    const double tc = t + offset();
    const auto window = static_cast<long long>(std::floor(tc / kWindowS));
    prune(window);
    std::vector<std::string> request_keys;
    for (const auto& rule : config_->rules) {
      const auto scope = scope_of(rule, subject);
      if (!scope) continue;
      if (rule.tokens_per_minute > 0) {
        const double used = committed(window, *scope + "/tpm");
        if (used >= rule.tokens_per_minute) return refuse(rule, *scope, true, used, window, tc);
      }
      if (rule.requests_per_minute > 0) {
        const double used = committed(window, *scope + "/rpm");
        if (used + 1 > rule.requests_per_minute) return refuse(rule, *scope, false, used, window, tc);
        request_keys.push_back(*scope + "/rpm");
      }
    }
    for (const auto& k : request_keys) add(window, k, 1);  // only once every limit admitted it
    return {};
  }

  void charge_tokens(const Subject& subject, double t_admitted, std::int64_t tokens) override {
    if (tokens <= 0) return;
    std::lock_guard lock(mu_);
    const auto window = static_cast<long long>(std::floor((t_admitted + offset()) / kWindowS));
    for (const auto& rule : config_->rules)
      if (rule.tokens_per_minute > 0)
        if (const auto scope = scope_of(rule, subject)) add(window, *scope + "/tpm", static_cast<double>(tokens));
  }

 private:
  double offset() const { return shared_ ? shared_->clock_offset() : 0.0; }
  static std::string key(long long window, const std::string& k) { return k + "/" + std::to_string(window); }

  double committed(long long window, const std::string& k) {
    const auto full = key(window, k);
    const auto w = own_.find(window);
    double own = 0;
    if (w != own_.end())
      if (const auto it = w->second.find(full); it != w->second.end()) own = it->second;
    if (!shared_) return own;
    return shared_->view(full, own).effective(own, 0, shared_->expected_gateways());
  }

  void add(long long window, const std::string& k, double n) {
    const auto full = key(window, k);
    const double total = (own_[window][full] += n);
    if (shared_) shared_->publish(full, total);
  }

  // Only the current window and the one before (late token charges) are kept.
  void prune(long long window) {
    while (!own_.empty() && own_.begin()->first < window - 1) own_.erase(own_.begin());
  }

  Decision refuse(const RateLimitRule& rule, const std::string& scope, bool tokens, double used, long long window,
                  double tc) {
    Decision d;
    d.allowed = false;
    d.scope = scope;
    d.limit = tokens ? "tokens_per_minute" : "requests_per_minute";
    d.limit_value = tokens ? rule.tokens_per_minute : rule.requests_per_minute;
    d.used = used;
    d.retry_after_s = std::max(1.0, std::ceil(static_cast<double>(window + 1) * kWindowS - tc));
    d.message = "Rate limit reached for " + scope + ": " + count(d.limit_value) + (tokens ? " tokens" : " requests") +
                " per minute (" + count(used) + " used in this minute). Retry after " + count(d.retry_after_s) + " s.";
    if (auto* c = rejections_[tokens ? 1 : 0][static_cast<int>(rule.kind)]) c->Increment();
    return d;
  }

  std::shared_ptr<const RateLimitConfig> config_;
  std::shared_ptr<redis::SharedTotals> shared_;
  std::mutex mu_;
  std::map<long long, std::map<std::string, double>> own_;  // window -> "tenant:acme/rpm/<window>" -> count
  std::array<std::array<prometheus::Counter*, 3>, 2> rejections_{};
};

}  // namespace

std::shared_ptr<RateLimiter> make_rate_limiter(std::shared_ptr<const RateLimitConfig> config,
                                               std::shared_ptr<redis::SharedTotals> shared,
                                               prometheus::Registry* registry) {
  return std::make_shared<Limiter>(std::move(config), std::move(shared), registry);
}

std::shared_ptr<redis::SharedTotals> make_redis_windows(std::shared_ptr<redis::Client> client,
                                                        std::shared_ptr<const redis::RedisConfig> config,
                                                        prometheus::Registry* registry) {
  redis::SharedTotals::Options o;
  o.name = "rate_limits";
  // A window's counts die with it, so a new id per process loses nothing on a restart.
  o.gateway_id = redis::random_gateway_id();
  o.ttl_s = [](const std::string&) { return 2 * static_cast<long>(kWindowS); };
  o.watch_s = 2 * kWindowS;
  return redis::make_shared_totals(std::move(client), std::move(config), std::move(o), registry);
}

}  // namespace tidegate::ratelimit
