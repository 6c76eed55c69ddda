#pragma once
// Budget spend per scope and period. Not thread-safe: CostAccounting serialises calls, which is
// also what bounds a race to the limit (a check and the spend it reads are one critical section).
//
// A request is charged wholly to the period in which it started: that is the period whose check
// admitted it, and a request that began at 23:59 must not eat the next day's budget before that
// day had a chance to refuse anything. Reports place each slice of cost at the time it was
// incurred instead, so a report across midnight still adds up.
#include <boost/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tidegate/cost/accounting.h"
#include "tidegate/cost/config.h"
#include "tidegate/cost/shared_spend.h"

namespace tidegate::cost {

struct ScopeRef {
  std::size_t rule;
  std::string scope;  // "tenant:acme", "tag:team=ml", "key:ci-bot"
};

struct BudgetAlert {
  std::string scope;
  std::string period;     // "day" / "month"
  std::string period_id;  // "2026-11-30" / "2026-11"
  std::string level;      // "soft" / "hard"
  double spend_usd = 0;
  double limit_usd = 0;
};


// UTC period of Unix time t: "2026-11-30" for a day, "2026-11" for a month, and its end.
std::string period_id(BudgetPeriod p, double t);
double period_end(BudgetPeriod p, double t);
std::string iso8601(double unix_seconds);

class Budgets final {
 public:
  explicit Budgets(std::shared_ptr<const CostConfig> config) : config_(std::move(config)) {}

  // With several gateways (tidegate/cost/shared_spend.h): checks read the fleet's spend, each
  // charge publishes this gateway's new total, and periods follow the store's clock. Set once,
  // before the first check; publishes what was restored from disk (the store may have lost it).
  void set_shared(std::shared_ptr<SharedSpend> shared);
  bool shared() const { return shared_ != nullptr; }

  std::vector<ScopeRef> scopes(const std::string& key_id, const std::string& tenant,
                               const std::map<std::string, std::string>& mapped_tags) const;
  BudgetDecision check(const std::vector<ScopeRef>& refs, double t) const;
  void reserve(const std::vector<ScopeRef>& refs, double usd);
  void release(const std::vector<ScopeRef>& refs, double usd);
  // What one charge changed, for the spend journal: the spend keys it added `usd` to and the
  // alert markers it set. apply() replays exactly that after a restart.
  struct Charged {
    std::vector<std::string> keys;
    std::vector<std::string> fired;
  };
  // Adds spend to each scope's period of t_period; returns alerts crossing a limit for the first
  // time in that period.
  std::vector<BudgetAlert> charge(const std::vector<ScopeRef>& refs, double usd, double t_period,
                                  Charged* charged = nullptr);
  void apply(const std::vector<std::string>& keys, double usd, const std::vector<std::string>& fired);
  double spend(const ScopeRef& ref, double t) const;
  // The scope's spend in the period of t: this gateway's, or with shared budgets the fleet's as
  // far as this gateway knows it. What alerts and the spend gauge report.
  double total_spend(const ScopeRef& ref, double t) const;

  // Snapshot persistence: temp file, fsync, rename, fsync of the directory. to_json() under
  // the caller's lock, write() outside it (fsync is slow). The caller may add its own fields.
  boost::json::object to_json() const;
  void restore(const boost::json::object& snapshot);
  static bool write(const std::string& dir, const std::string& body, std::string* error);
  // The snapshot file's object; nullopt with `error` set when it is unreadable, an empty
  // object when there is none yet.
  static std::optional<boost::json::object> read(const std::string& dir, std::string* error);

 private:
  std::string spend_key(const ScopeRef& ref, double t) const;
  // What the hard limit is compared with: this gateway's view of the scope's spend plus requests in flight.
  double committed(const ScopeRef& ref, double t) const;

  std::shared_ptr<const CostConfig> config_;
  std::map<std::string, double> spend_;  // "tenant:acme/day/2026-11-30" -> usd
  std::set<std::string> fired_;          // spend key + "#soft" / "#hard"
  std::map<std::string, double> reserved_;  // scope/period -> usd of requests in flight
  std::shared_ptr<SharedSpend> shared_;     // null: this gateway alone
};

}  // namespace tidegate::cost
