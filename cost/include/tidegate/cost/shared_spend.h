#pragma once
// Budget spend shared by several gateways (issue 22), so one hard limit holds for the fleet.
//
// Each gateway publishes its OWN cumulative spend per spend key ("tenant:acme/day/2026-12-03");
// the store keeps, per key, every gateway's latest total and the fleet sum. Publishing a total
// (not an increment) makes a retry after a timeout harmless, and lets the fleet sum be rebuilt
// from the gateways' local ledgers (their spend journals) when the store lost its data.
//
// The hard-limit check never waits on the store: it reads the fleet sum cached locally (refreshed
// in the background) plus this gateway's spend not yet acknowledged and its requests in flight.
// Overshoot across gateways is therefore bounded by what is in flight, plus what the others
// admitted within one refresh interval, not by the number of gateways.
//
// Degraded mode: while the store is unreachable a gateway counts its unacknowledged spend and
// reservations expected_gateways() times over, i.e. it takes its 1/N share of what was left when
// the store was last seen, so N isolated gateways together still stay within the limit.
#include <memory>
#include <optional>
#include <string>

namespace prometheus {
class Registry;
}

namespace tidegate::redis {
class Client;
struct RedisConfig;
}  // namespace tidegate::redis

namespace tidegate::cost {

struct SharedView {
  std::optional<double> fleet;  // fleet sum last read from the store (includes this gateway's acknowledged part)
  double unacked = 0;           // this gateway's spend on the key the store has not acknowledged yet
  bool healthy = false;         // false: degraded (local enforcement with the 1/N margin)
};

// Thread-safe; no call blocks on the network.
class SharedSpend {
 public:
  virtual ~SharedSpend() = default;
  // This gateway's cumulative spend on `key` is now `own_total` (it only grows).
  virtual void publish(const std::string& key, double own_total) = 0;
  // What the check needs for `key`; also keeps the key refreshed while it is being checked.
  virtual SharedView view(const std::string& key, double own_total) = 0;
  // Seconds to add to this gateway's clock to get the store's (budget periods follow one clock).
  virtual double clock_offset() const = 0;
  virtual int expected_gateways() const = 0;
};

// The Redis store: a Lua script keeps HASH <prefix>:spend:<key>:by (gateway -> total) and the sum in
// <prefix>:spend:<key>; TIME gives the clock offset. The gateway's id is kept in
// <data_dir>/gateway_id so a restarted gateway (which restores its spend from its journal) publishes
// under the same name; without a data_dir it is random per process (and so is its spend).
// Background refreshes run on `client`'s executor every config.refresh_interval.
std::shared_ptr<SharedSpend> make_redis_shared_spend(std::shared_ptr<redis::Client> client,
                                                     std::shared_ptr<const redis::RedisConfig> config,
                                                     const std::string& data_dir, prometheus::Registry* registry);

}  // namespace tidegate::cost
