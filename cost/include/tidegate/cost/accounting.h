#pragma once
// Cost accounting as the gateway and scaler see it. Times are explicit seconds so the replay
// tool and tests drive it without real clocks; they are read as Unix time (UTC) where calendar
// matters (budget periods, report ranges), so the gateway passes system_clock seconds and replay
// a virtual epoch. A time earlier than the last one seen for a replica is clamped (never a
// negative cost) and counted in tidegate_cost_events_total{reason="clock_regression"}.
// Thread-safe (one lock; no I/O under it). Conservation: sum(request costs) + idle + standby ==
// sum(replica costs). Attribution rules: cost/src/ledger.h; budget periods: cost/src/budgets.h.
#include <boost/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "tidegate/common/replica_state.h"

namespace prometheus {
class Registry;
}
namespace YAML {
class Node;
}

namespace tidegate::cost {

struct RequestLabels {
  std::string model;
  std::string tenant;
  std::string key_id;                       // API key name (never the secret)
  std::map<std::string, std::string> tags;  // team, project, ...
  // The cache's audit of a hit (issue 19): priced like any model call, but as kind="audit" under
  // tenant "(audit)", outside every budget: it is the gateway's spend, not a client's.
  bool audit = false;
};

inline constexpr const char* kAuditTenant = "(audit)";

struct CostTotals {
  double bill_usd = 0;         // replica time + paid-API tokens + cache lookups
  double request_usd = 0;      // settled shares of requests (and API / lookup charges)
  double idle_usd = 0;
  double standby_usd = 0;
  double pending_usd = 0;      // replica time shared by requests still in flight, not settled yet
  double cache_savings_usd = 0;
  std::uint64_t requests = 0;  // finished requests (model calls)
  std::uint64_t cache_hits = 0;
  std::uint64_t in_flight = 0;
  std::uint64_t clock_regressions = 0;
  std::uint64_t estimated_members = 0;  // segment shares settled with an estimated work
};

struct BudgetDecision {
  bool allowed = true;
  std::string message;  // OpenAI-style message when refused
  std::string scope;    // which budget refused ("tenant:acme/day")
};

class CostAccounting {
 public:
  virtual ~CostAccounting() = default;

  // Replica lifecycle (from the scaler or, for static replicas, the gateway at start).
  virtual void replica_state(const std::string& replica_id, const std::string& model, const std::string& replica_class,
                             ReplicaState state, double t) = 0;

  // A request routed to a replica. Returns a handle for progress/finish.
  virtual std::uint64_t request_started(const RequestLabels& labels, const std::string& replica_id, double t) = 0;
  // Cumulative token counts so far (streams report as chunks pass; others at the end).
  // `cached_prompt_tokens`: of the prompt, found in the engine's prefix cache (priced at
  // CostConfig::w_cached_prompt); 0 when the engine does not say.
  virtual void request_progress(std::uint64_t handle, std::int64_t prompt_tokens, std::int64_t completion_tokens,
                                double t, std::int64_t cached_prompt_tokens = 0) = 0;
  // Final; returns the request's cost in USD. Failed requests are finished too (their cost counts).
  virtual double request_finished(std::uint64_t handle, double t) = 0;

  // A cache hit: returns its cost (lookup only); *saving receives the avoided model cost.
  virtual double cache_hit(const RequestLabels& labels, std::int64_t prompt_tokens, std::int64_t completion_tokens,
                           double t, double* saving) = 0;

  // Hard budget check before forwarding.
  virtual BudgetDecision check_budget(const RequestLabels& labels, double t) = 0;

  // GET /admin/costs?by=...&from=&to=; format "json" or "csv". Returns body and content type.
  virtual std::pair<std::string, std::string> report(const std::string& by, std::optional<double> from,
                                                     std::optional<double> to, const std::string& format) = 0;
  // Live figures for the built-in dashboard.
  virtual boost::json::object dashboard_snapshot(double t) = 0;

  // Spend is journaled as each request settles (durable against a process crash at once);
  // sync() makes it durable against a machine crash (fdatasync; call about once a second);
  // flush() snapshots everything and trims the journal (every few seconds, and at exit).
  virtual void flush() = 0;
  virtual void sync() {}

  // Extensions (default no-ops keep other implementations compiling).
  // Closes every replica's open interval at t: call about once a second so idle and standby
  // time reach metrics without waiting for the next request.
  virtual void advance(double t) {}
  virtual CostTotals totals() { return {}; }
  // Test hook: waits (bounded) until queued budget alerts were logged and posted.
  virtual bool wait_alerts_idle(double timeout_s) { return true; }
};

// The 429 body for a refused request, OpenAI style:
// {"error":{"message":...,"type":"insufficient_quota","param":null,"code":"budget_exceeded"}}
std::string budget_error_body(const BudgetDecision& decision);

struct CostConfig;
class SharedSpend;
std::shared_ptr<const CostConfig> parse_cost_config(const YAML::Node& node, const std::string& path);
// `shared`: budgets enforced across gateways (tidegate/cost/shared_spend.h); null: this gateway alone.
std::unique_ptr<CostAccounting> make_cost_accounting(std::shared_ptr<const CostConfig> config,
                                                     prometheus::Registry& registry,
                                                     std::shared_ptr<SharedSpend> shared = nullptr);

}  // namespace tidegate::cost
