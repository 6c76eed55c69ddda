#pragma once
// Totals shared by several gateways: each gateway publishes its OWN cumulative total per key and
// reads the fleet's sum. Publishing a total (not an increment) makes a retry after a timeout
// harmless and lets the sum be rebuilt from the gateways' own counts when Redis lost its data:
// after every reconnect each gateway publishes its totals again. Budget spend (cost/) and rate
// limit windows (ratelimit/) are both kept this way.
//
// Nothing here waits on Redis: view() answers from the sums cached locally, re-read in the
// background every refresh_interval, plus what this gateway added that Redis has not acknowledged.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tidegate/redis/client.h"

namespace tidegate::redis {

struct TotalsView {
  std::optional<double> fleet;  // the fleet's sum last read (includes this gateway's acknowledged part)
  double unacked = 0;           // this gateway's total not acknowledged by Redis yet
  bool healthy = false;         // false: Redis unreachable or the cached sums are stale
  // How a limit should see the key: shared, the fleet sum plus what is not in it yet; degraded,
  // what this gateway added since the fleet was last seen counts `expected_gateways` times over
  // (its 1/N share of what remained), so N isolated gateways together still keep the limit.
  double effective(double own_total, double extra, int expected_gateways) const;
};

class SharedTotals {
 public:
  struct Options {
    std::string name;          // "budgets", "rate_limits": key namespace, log and metric label
    std::string gateway_id;    // this gateway's field in every key's hash
    std::function<long(const std::string& key)> ttl_s;  // how long Redis keeps a key after a write
    double watch_s = 600;      // a key viewed is re-read this long after its last view
  };
  virtual ~SharedTotals() = default;
  // Thread-safe. This gateway's cumulative total on `key` is now `own_total` (only grows).
  virtual void publish(const std::string& key, double own_total) = 0;
  // Thread-safe; keeps the key refreshed while it is viewed.
  virtual TotalsView view(const std::string& key, double own_total) = 0;
  // Seconds to add to this host's clock to get Redis's (TIME): one clock for every gateway.
  virtual double clock_offset() const = 0;
  virtual int expected_gateways() const = 0;
};

// Redis layout: HASH <prefix>:<name>:<key>:by (gateway -> total) and the sum in <prefix>:<name>:<key>,
// updated together by a Lua script. Background work runs on `client`'s executor.
std::shared_ptr<SharedTotals> make_shared_totals(std::shared_ptr<Client> client, std::shared_ptr<const RedisConfig> config,
                                                 SharedTotals::Options options, prometheus::Registry* registry);

// A random gateway id (16 hex digits).
std::string random_gateway_id();

}  // namespace tidegate::redis
