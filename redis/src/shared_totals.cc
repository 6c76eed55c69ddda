// SharedTotals on Redis (the header has the model). Runs on the Redis client's strand (its
// callbacks and the refresh timer); publish() and view() are called from any thread, under the
// callers' own locks, and only take this object's lock and post commands.
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <random>

#include "tidegate/common/log.h"
#include "tidegate/redis/shared_totals.h"

namespace tidegate::redis {
namespace {

namespace asio = boost::asio;

// KEYS[1]: hash gateway -> its total; KEYS[2]: the fleet sum. ARGV: gateway id, its total, TTL.
// A total not above the stored one (a late retry) changes nothing, so publishing is idempotent;
// after Redis lost its data, each gateway's next publish adds its whole total back.
constexpr const char* kPublishScript = R"lua(
local old = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local new = tonumber(ARGV[2])
local sum
if new > old then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  sum = redis.call('INCRBYFLOAT', KEYS[2], tostring(new - old))
else
  sum = redis.call('GET', KEYS[2]) or '0'
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return sum
)lua";

std::string exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
double mono_now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

class RedisTotals final : public SharedTotals, public std::enable_shared_from_this<RedisTotals> {
 public:
  RedisTotals(std::shared_ptr<Client> client, std::shared_ptr<const RedisConfig> config, Options options,
              prometheus::Registry* registry)
      : client_(std::move(client)), config_(std::move(config)), options_(std::move(options)), id_(options_.gateway_id) {
    if (!registry) return;
    degraded_ = &prometheus::BuildGauge().Name("tidegate_shared_state_degraded")
                     .Help("1 while this state is enforced from local data only (Redis unreachable or its sums stale)")
                     .Register(*registry).Add({{"state", options_.name}});
    degraded_->Set(1);
    auto& pub = prometheus::BuildCounter().Name("tidegate_shared_state_publish_total")
                    .Help("Publications of this gateway's totals to Redis by result").Register(*registry);
    published_ok_ = &pub.Add({{"state", options_.name}, {"result", "ok"}});
    published_failed_ = &pub.Add({{"state", options_.name}, {"result", "failed"}});
  }

  void start() {
    log::info("redis.shared_state_start", {{"state", options_.name}, {"gateway_id", id_}});
    // The first tick runs on the strand too: everything the timer touches stays on it.
    asio::post(client_->executor(), [self = shared_from_this()] {
      self->tick(std::make_shared<asio::steady_timer>(self->client_->executor()));
    });
  }

  void publish(const std::string& key, double own_total) override {
    std::lock_guard lock(mu_);
    auto& e = entries_[key];
    e.own = std::max(e.own, own_total);
    push(key, e);
  }

  TotalsView view(const std::string& key, double own_total) override {
    std::lock_guard lock(mu_);
    auto& e = entries_[key];
    e.own = std::max(e.own, own_total);
    e.watched_until = mono_now() + options_.watch_s;
    return {e.fleet, std::max(0.0, e.own - e.acked), healthy()};
  }

  double clock_offset() const override { return offset_.load(); }
  int expected_gateways() const override { return config_->expected_gateways; }

 private:
  struct Entry {
    double own = 0;        // this gateway's total
    double acked = 0;      // the part of it Redis acknowledged
    std::optional<double> fleet;
    double watched_until = 0;
    bool in_flight = false;
    bool repush = false;   // after a reconnect: Redis may have lost it (restart without persistence)
  };

  // Shared only while Redis answers and the cached sums are fresh; otherwise the 1/N margin.
  bool healthy() const {
    const double stale_after = std::max(1.0, 5 * config_->refresh_interval_s);
    return client_->health() == Health::kUp && mono_now() - last_refresh_ok_ < stale_after;
  }

  std::string sum_key(const std::string& key) const { return config_->key_prefix + ":" + options_.name + ":" + key; }

  // Under mu_.
  void push(const std::string& key, Entry& e) {
    if (e.in_flight || (e.own <= e.acked && !e.repush) || client_->health() != Health::kUp) return;
    e.in_flight = true;
    e.repush = false;
    const double value = e.own;
    client_->command({"EVAL", kPublishScript, "2", sum_key(key) + ":by", sum_key(key), id_, exact(value),
                      std::to_string(options_.ttl_s ? options_.ttl_s(key) : 86400)},
                     [weak = weak_from_this(), key, value](Result r) {
                       if (auto self = weak.lock()) self->pushed(key, value, r);
                     });
  }

  void pushed(const std::string& key, double value, const Result& r) {
    std::lock_guard lock(mu_);
    auto& e = entries_[key];
    e.in_flight = false;
    if (!r.ok()) {
      if (published_failed_) published_failed_->Increment();
      return;  // the next refresh retries (the script makes a repeat harmless)
    }
    if (published_ok_) published_ok_->Increment();
    e.acked = std::max(e.acked, value);
    e.fleet = r.reply.number(e.fleet.value_or(0));
    push(key, e);  // spend that arrived meanwhile
  }

  void tick(std::shared_ptr<asio::steady_timer> timer) {
    note_health();
    refresh();
    timer->expires_after(std::chrono::duration_cast<asio::steady_timer::duration>(
        std::chrono::duration<double>(config_->refresh_interval_s)));
    timer->async_wait([weak = weak_from_this(), timer](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->tick(timer);
    });
  }

  // One log line per transition between shared and degraded enforcement.
  void note_health() {
    const auto h = client_->health();
    if (h == Health::kConnecting && !was_up_) return;  // the first connect is still under way
    const bool up = h == Health::kUp;
    if (was_up_ && up == *was_up_) return;
    was_up_ = up;
    if (up) {
      std::lock_guard lock(mu_);
      for (auto& [key, e] : entries_) e.repush = true;
      log::info("redis.shared_state_restored", {{"state", options_.name}, {"gateway_id", id_}});
    } else {
      log::warn("redis.shared_state_degraded",
                {{"state", options_.name}, {"gateway_id", id_}, {"expected_gateways", config_->expected_gateways},
                 {"why", "redis unreachable: limits enforced locally at 1/N of what remained"}});
    }
  }

  void refresh() {
    if (client_->health() != Health::kUp) return set_degraded();
    const double sent = wall_now();
    client_->command({"TIME"}, [weak = weak_from_this(), sent](Result r) {
      auto self = weak.lock();
      if (!self || !r.ok() || r.reply.elements.size() != 2) return;
      const double redis_time = r.reply.elements[0].number() + r.reply.elements[1].number() / 1e6;
      self->offset_ = redis_time - (sent + wall_now()) / 2;  // the reply's midpoint
      std::lock_guard lock(self->mu_);
      self->last_refresh_ok_ = mono_now();
    });
    std::vector<std::string> watched;
    {
      std::lock_guard lock(mu_);
      const double now = mono_now();
      for (auto& [key, e] : entries_) {
        push(key, e);  // retries and reconnect re-publications (before the read: replies keep order)
        if (e.watched_until > now) watched.push_back(key);
      }
    }
    if (!watched.empty()) read(std::move(watched));
    set_degraded();
  }

  void read(std::vector<std::string> keys) {
    std::vector<std::string> args{"MGET"};
    for (const auto& k : keys) args.push_back(sum_key(k));
    client_->command(std::move(args), [weak = weak_from_this(), keys = std::move(keys)](Result r) {
      auto self = weak.lock();
      if (!self || !r.ok() || r.reply.elements.size() != keys.size()) return;
      std::lock_guard lock(self->mu_);
      for (std::size_t i = 0; i < keys.size(); ++i) {
        auto& e = self->entries_[keys[i]];
        // A key Redis no longer has (expired, or lost in a restart) sums to 0 until republished.
        e.fleet = r.reply.elements[i].number(0);
      }
      self->last_refresh_ok_ = mono_now();
    });
  }

  void set_degraded() {
    bool h;
    {
      std::lock_guard lock(mu_);
      h = healthy();
    }
    if (degraded_) degraded_->Set(h ? 0 : 1);
  }

  std::shared_ptr<Client> client_;
  std::shared_ptr<const RedisConfig> config_;
  Options options_;
  std::string id_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
  double last_refresh_ok_ = -1e9;  // mono_now() of the last answered read
  std::atomic<double> offset_{0};
  std::optional<bool> was_up_;  // strand only; empty until the first connect settled
  prometheus::Gauge* degraded_ = nullptr;
  prometheus::Counter* published_ok_ = nullptr;
  prometheus::Counter* published_failed_ = nullptr;
};

}  // namespace

double TotalsView::effective(double own_total, double extra, int expected_gateways) const {
  const double n = healthy ? 1.0 : static_cast<double>(std::max(1, expected_gateways));
  return std::max(fleet.value_or(0.0), own_total - unacked) + n * (unacked + extra);
}

std::string random_gateway_id() {
  std::random_device rd;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

std::shared_ptr<SharedTotals> make_shared_totals(std::shared_ptr<Client> client, std::shared_ptr<const RedisConfig> config,
                                                 SharedTotals::Options options, prometheus::Registry* registry) {
  auto s = std::make_shared<RedisTotals>(std::move(client), std::move(config), std::move(options), registry);
  s->start();
  return s;
}

}  // namespace tidegate::redis
