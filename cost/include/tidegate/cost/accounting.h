#pragma once
// Cost accounting as the gateway and scaler see it. Times are explicit (seconds on a
// monotonic or virtual clock) so the replay tool and tests drive it without real clocks.
// Thread-safe. Conservation: sum(request costs) + idle + standby == sum(replica costs).
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
  virtual void request_progress(std::uint64_t handle, std::int64_t prompt_tokens, std::int64_t completion_tokens,
                                double t) = 0;
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

  virtual void flush() = 0;  // persists spend (budgets survive restarts)
};

struct CostConfig;
std::shared_ptr<const CostConfig> parse_cost_config(const YAML::Node& node, const std::string& path);
std::unique_ptr<CostAccounting> make_cost_accounting(std::shared_ptr<const CostConfig> config,
                                                     prometheus::Registry& registry);

}  // namespace tidegate::cost
