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
#include <set>

#include "tidegate/common/log.h"
#include "tidegate/redis/shared_totals.h"

namespace tidegate::redis {
namespace {

namespace asio = boost::asio;

// KEYS: pairs of (hash gateway -> its total, the fleet's sum); ARGV: gateway id, then a total and
// a TTL per pair. A total not above the stored one (a late retry) changes nothing, so publishing
// is idempotent; after Redis lost its data, each gateway's next publication adds its whole total
// back. Returns the sums. (One Redis, not Redis Cluster: the keys of a call share no slot.)
constexpr const char* kPublishScript = R"lua(
local id = ARGV[1]
local sums = {}
for i = 1, #KEYS / 2 do
  local by, sum = KEYS[2 * i - 1], KEYS[2 * i]
  local new = tonumber(ARGV[2 * i])
  local old = tonumber(redis.call('HGET', by, id) or '0')
  local s
  if new > old then
    redis.call('HSET', by, id, ARGV[2 * i])
    s = redis.call('INCRBYFLOAT', sum, tostring(new - old))
  else
    s = redis.call('GET', sum) or '0'
  end
  redis.call('EXPIRE', by, ARGV[2 * i + 1])
  redis.call('EXPIRE', sum, ARGV[2 * i + 1])
  sums[i] = s
end
return sums
)lua";

// Publications wait this long to be batched: under load one call carries every key that changed,
// instead of one call per request (the fleet reads them every refresh_interval anyway).
constexpr auto kPublishDelay = std::chrono::milliseconds(5);
constexpr std::size_t kMaxKeysPerCall = 256;

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
    unacknowledged_ = &prometheus::BuildGauge().Name("tidegate_shared_state_unacknowledged")
                           .Help("This gateway's part of the totals that Redis has not confirmed yet (counted N "
                                 "times by degraded enforcement)")
                           .Register(*registry).Add({{"state", options_.name}});
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
    raise_own(e, own_total);
    if (e.own <= e.acked) return;
    dirty_.insert(key);
    schedule_flush();
  }

  TotalsView view(const std::string& key, double own_total) override {
    std::lock_guard lock(mu_);
    auto& e = entries_[key];
    raise_own(e, own_total);
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
  };

  // Shared only while Redis answers and the cached sums are fresh; otherwise the 1/N margin.
  bool healthy() const {
    const double stale_after = std::max(1.0, 5 * config_->refresh_interval_s);
    return client_->health() == Health::kUp && mono_now() - last_refresh_ok_ < stale_after;
  }

  std::string sum_key(const std::string& key) const { return config_->key_prefix + ":" + options_.name + ":" + key; }

  // Under mu_. At most one call per kPublishDelay: under load, one call carries many requests.
  void schedule_flush() {
    if (flush_scheduled_) return;
    flush_scheduled_ = true;
    auto timer = std::make_shared<asio::steady_timer>(client_->executor(), kPublishDelay);
    timer->async_wait([weak = weak_from_this(), timer](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->flush();
    });
  }

  // One call with every key that changed (a batch at a time: later changes wait for it and go
  // together in the next). On the strand.
  void flush() {
    std::vector<std::pair<std::string, double>> batch;
    std::vector<std::string> args;
    {
      std::lock_guard lock(mu_);
      flush_scheduled_ = false;
      if (batch_in_flight_ || dirty_.empty() || client_->health() != Health::kUp) return;
      args = {sha_.empty() ? "EVAL" : "EVALSHA", sha_.empty() ? kPublishScript : sha_, "", id_};
      std::vector<std::string> values;
      while (!dirty_.empty() && batch.size() < kMaxKeysPerCall) {
        const auto key = *dirty_.begin();
        dirty_.erase(dirty_.begin());
        const double own = entries_[key].own;
        batch.emplace_back(key, own);
        args.insert(args.begin() + 3 + 2 * static_cast<long>(batch.size() - 1), {sum_key(key) + ":by", sum_key(key)});
        values.push_back(exact(own));
        values.push_back(std::to_string(options_.ttl_s ? options_.ttl_s(key) : 86400));
      }
      args[2] = std::to_string(2 * batch.size());
      args.insert(args.end(), values.begin(), values.end());
      batch_in_flight_ = true;
    }
    client_->command(std::move(args), [weak = weak_from_this(), batch = std::move(batch)](Result r) {
      if (auto self = weak.lock()) self->flushed(batch, r);
    });
  }

  void flushed(const std::vector<std::pair<std::string, double>>& batch, const Result& r) {
    std::lock_guard lock(mu_);
    batch_in_flight_ = false;
    if (r.outcome == Result::Outcome::kReply && r.reply.is_error() && r.reply.str.rfind("NOSCRIPT", 0) == 0)
      sha_.clear();  // Redis restarted without the script: EVAL it again (the next tick retries)
    const bool ok = r.ok() && r.reply.elements.size() == batch.size();
    if (auto* c = ok ? published_ok_ : published_failed_) c->Increment();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      auto& e = entries_[batch[i].first];
      if (!ok) {
        dirty_.insert(batch[i].first);  // retried by the next flush (the script makes a repeat harmless)
        continue;
      }
      e.acked = std::max(e.acked, batch[i].second);
      e.fleet = r.reply.elements[i].number(e.fleet.value_or(0));
      if (e.own > e.acked) dirty_.insert(batch[i].first);
    }
    if (ok && unacknowledged_) {  // summed afresh once per batch: no drift from the increments
      double sum = 0;
      for (const auto& [_, e] : entries_) sum += std::max(0.0, e.own - e.acked);
      unacknowledged_->Set(sum);
    }
    if (ok && !dirty_.empty()) schedule_flush();  // what arrived while this batch was out
  }

  // mu_ held. On the request path: the gauge moves by what this key's unacknowledged part did.
  void raise_own(Entry& e, double own_total) {
    if (!(own_total > e.own)) return;
    const double before = std::max(0.0, e.own - e.acked);
    e.own = own_total;
    if (unacknowledged_) unacknowledged_->Increment(std::max(0.0, e.own - e.acked) - before);
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
      // Redis may have lost everything (a restart without persistence): publish every total again.
      for (auto& [key, e] : entries_)
        if (e.own > 0) dirty_.insert(key);
      sha_.clear();
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
    load_script();
    flush();  // retries and reconnect re-publications, before the read (replies keep their order)
    std::vector<std::string> watched;
    {
      std::lock_guard lock(mu_);
      const double now = mono_now();
      for (auto& [key, e] : entries_)
        if (e.watched_until > now) watched.push_back(key);
    }
    if (!watched.empty()) read(std::move(watched));
    set_degraded();
  }

  // EVALSHA sends 40 bytes where EVAL sends the whole script with every call.
  void load_script() {
    {
      std::lock_guard lock(mu_);
      if (!sha_.empty() || loading_script_) return;
      loading_script_ = true;
    }
    client_->command({"SCRIPT", "LOAD", kPublishScript}, [weak = weak_from_this()](Result r) {
      auto self = weak.lock();
      if (!self) return;
      std::lock_guard lock(self->mu_);
      self->loading_script_ = false;
      if (r.ok() && r.reply.type == Reply::Type::kString) self->sha_ = r.reply.str;
    });
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
  std::set<std::string> dirty_;  // keys whose total Redis has not acknowledged
  bool flush_scheduled_ = false;
  bool batch_in_flight_ = false;
  bool loading_script_ = false;
  std::string sha_;              // of kPublishScript, once SCRIPT LOAD answered
  double last_refresh_ok_ = -1e9;  // mono_now() of the last answered read
  std::atomic<double> offset_{0};
  std::optional<bool> was_up_;  // strand only; empty until the first connect settled
  prometheus::Gauge* degraded_ = nullptr;
  prometheus::Counter* published_ok_ = nullptr;
  prometheus::Counter* published_failed_ = nullptr;
  prometheus::Gauge* unacknowledged_ = nullptr;
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
