#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <boost/container/small_vector.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
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

// Whether a rule applies to this subject, and the value it scopes on ("acme" of tenant:acme).
std::optional<std::string_view> scope_value(const RateLimitRule& r, const Subject& s) {
  const std::string_view value = r.kind == ScopeKind::kKey ? s.key_id : r.kind == ScopeKind::kTenant ? s.tenant : s.model;
  if (value.empty() || (r.match != "*" && r.match != value)) return std::nullopt;
  return value;
}

// Lookups by string_view into maps keyed by std::string, without building a string.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

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

  // Every request passes here, so the common case allocates nothing: a scope is looked up by a
  // string built in a kept buffer, and a window's counts are one entry per scope.
  Decision admit(const Subject& subject, double t) override {
    std::lock_guard lock(mu_);
    const double tc = t + offset();
    const auto window = static_cast<long long>(std::floor(tc / kWindowS));
    prune(window);
    boost::container::small_vector<Counts*, 8> counted;  // the rpm counts to bump once all admit
    for (const auto& rule : config_->rules) {
      const auto value = scope_value(rule, subject);
      if (!value) continue;
      const auto& scope = scope_of(rule, *value);
      auto& own = counts(window, scope);
      if (rule.tokens_per_minute > 0) {
        const double used = committed(window, scope, "/tpm", own.tpm);
        if (used >= rule.tokens_per_minute) return refuse(rule, scope, true, used, window, tc);
      }
      if (rule.requests_per_minute > 0) {
        const double used = committed(window, scope, "/rpm", own.rpm);
        if (used + 1 > rule.requests_per_minute) return refuse(rule, scope, false, used, window, tc);
        counted.push_back(&own);
      }
    }
    // Only once every limit admitted it. Entries are not moved by later inserts (node-based).
    for (auto* c : counted) {
      c->rpm += 1;
      if (shared_) shared_->publish(shared_key(window, c->scope, "/rpm"), c->rpm);
    }
    return {};
  }

  void charge_tokens(const Subject& subject, double t_admitted, std::int64_t tokens) override {
    if (tokens <= 0) return;
    std::lock_guard lock(mu_);
    const auto window = static_cast<long long>(std::floor((t_admitted + offset()) / kWindowS));
    if (window < current_ - 1) return;  // its window was already dropped
    for (const auto& rule : config_->rules) {
      if (rule.tokens_per_minute <= 0) continue;
      const auto value = scope_value(rule, subject);
      if (!value) continue;
      auto& own = counts(window, scope_of(rule, *value));
      own.tpm += static_cast<double>(tokens);
      if (shared_) shared_->publish(shared_key(window, own.scope, "/tpm"), own.tpm);
    }
  }

 private:
  struct Counts {
    std::string scope;  // "tenant:acme"
    double rpm = 0, tpm = 0;
  };
  using Window = std::unordered_map<std::string, Counts, StringHash, std::equal_to<>>;

  double offset() const { return shared_ ? shared_->clock_offset() : 0.0; }

  // "tenant:acme", in a kept buffer (valid until the next call).
  const std::string& scope_of(const RateLimitRule& rule, std::string_view value) {
    scope_.assign(to_string(rule.kind));
    scope_ += ':';
    scope_ += value;
    return scope_;
  }
  Counts& counts(long long window, const std::string& scope) {
    auto& w = windows_[window];
    auto it = w.find(std::string_view(scope));
    if (it == w.end()) it = w.emplace(scope, Counts{scope}).first;
    return it->second;
  }
  // The fleet's key on Redis: "tenant:acme/rpm/<window>".
  static std::string shared_key(long long window, const std::string& scope, std::string_view what) {
    std::string k = scope;
    k += what;
    k += '/';
    k += std::to_string(window);
    return k;
  }
  double committed(long long window, const std::string& scope, std::string_view what, double own) {
    if (!shared_) return own;
    return shared_->view(shared_key(window, scope, what), own).effective(own, 0, shared_->expected_gateways());
  }

  // Only the current window and the one before (late token charges) are kept.
  void prune(long long window) {
    current_ = std::max(current_, window);
    while (!windows_.empty() && windows_.begin()->first < current_ - 1) windows_.erase(windows_.begin());
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
  std::map<long long, Window> windows_;  // the current window and the one before
  long long current_ = std::numeric_limits<long long>::min() + 1;
  std::string scope_;                     // scope_of's buffer
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
