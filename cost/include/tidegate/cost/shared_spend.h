#pragma once
// Budget spend shared by several gateways (issue 22), so one hard limit holds for the fleet.
// Each gateway publishes its own cumulative spend per spend key ("tenant:acme/day/2026-12-03")
// and the check reads the fleet's sum (redis/include/tidegate/redis/shared_totals.h has the model:
// idempotent publication, rebuild after Redis lost its data, the 1/N margin while degraded).
//
// The check never waits on Redis: the fleet's sum is cached locally and re-read in the background.
// Overshoot across gateways is bounded by the requests in flight plus what the others admitted
// within one refresh interval, not by the number of gateways.
#include <memory>
#include <string>

namespace prometheus {
class Registry;
}

namespace tidegate::redis {
class Client;
struct RedisConfig;
}  // namespace tidegate::redis

namespace tidegate::cost {

// Thread-safe; no call blocks on the network.
class SharedSpend {
 public:
  virtual ~SharedSpend() = default;
  // This gateway's cumulative spend on `key` is now `own_total` (it only grows).
  virtual void publish(const std::string& key, double own_total) = 0;
  // What the hard limit is compared with for `key`, given this gateway's own total and the
  // reservations of its requests in flight. Keeps the key refreshed while it is being checked.
  virtual double committed(const std::string& key, double own_total, double reserved) = 0;
  // The fleet's spend on `key` as this gateway knows it (for alerts and the spend gauge: no
  // degraded margin in it).
  virtual double fleet_total(const std::string& key, double own_total) = 0;
  // Seconds to add to this gateway's clock to get the store's (budget periods follow one clock).
  virtual double clock_offset() const = 0;
};

struct CostConfig;

// The Redis store: keys <prefix>:budgets:<key> (the sum) and <prefix>:budgets:<key>:by (per gateway);
// TIME gives the clock offset. The gateway's id is kept in cost.data_dir/gateway_id so a restarted
// gateway (which restores its spend from its journal) publishes under the same name; without a
// data_dir it is random per process (and so is its spend). Gateways whose budget rules differ are
// reported (log cost.budget_config_disagrees, tidegate_budget_config_disagreement).
// Background refreshes run on `client`'s executor every config.refresh_interval.
std::shared_ptr<SharedSpend> make_redis_shared_spend(std::shared_ptr<redis::Client> client,
                                                     std::shared_ptr<const redis::RedisConfig> config,
                                                     const CostConfig& cost, prometheus::Registry* registry);

}  // namespace tidegate::cost
