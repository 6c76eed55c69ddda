#pragma once
// CostAccounting: the ledger, budgets, buckets, live series and metrics behind one lock. Sink of
// the ledger's accruals, which it fans out to every view so they all add up to the same bill.
#include <mutex>
#include <set>
#include <unordered_map>

#include "alerts.h"
#include "budgets.h"
#include "buckets.h"
#include "ledger.h"
#include "live.h"
#include "metrics.h"
#include "spend_journal.h"
#include "tidegate/cost/accounting.h"

namespace tidegate::cost {

inline constexpr const char* kSharedTenant = "(shared)";  // tenant label of idle and standby cost

class CostAccountingImpl final : public CostAccounting, private AccrualSink {
 public:
  CostAccountingImpl(std::shared_ptr<const CostConfig> config, prometheus::Registry& registry,
                     std::shared_ptr<SharedSpend> shared = nullptr);
  ~CostAccountingImpl() override;

  void replica_state(const std::string& replica_id, const std::string& model, const std::string& replica_class,
                     ReplicaState state, double t) override;
  std::uint64_t request_started(const RequestLabels& labels, const std::string& replica_id, double t) override;
  void request_progress(std::uint64_t handle, std::int64_t prompt_tokens, std::int64_t completion_tokens, double t,
                        std::int64_t cached_prompt_tokens = 0) override;
  double request_finished(std::uint64_t handle, double t) override;
  double cache_hit(const RequestLabels& labels, std::int64_t prompt_tokens, std::int64_t completion_tokens, double t,
                   double* saving) override;
  BudgetDecision check_budget(const RequestLabels& labels, double t) override;
  std::pair<std::string, std::string> report(const std::string& by, std::optional<double> from,
                                             std::optional<double> to, const std::string& format) override;
  boost::json::object dashboard_snapshot(double t) override;
  void flush() override;
  void sync() override;
  void advance(double t) override;
  CostTotals totals() override;
  bool wait_alerts_idle(double timeout_s) override;

 private:
  enum class Billing { kReplica, kApi, kNone };
  struct Request {
    std::string model, tenant;
    std::map<std::string, std::string> tags;  // mapped to the allow-list
    std::vector<std::string> dims;            // bucket keys: tenant:, model:, tag:
    std::vector<ScopeRef> scopes;
    Billing billing = Billing::kNone;
    double t_start = 0;
    double prompt = 0, completion = 0;
    double cached = 0;  // of prompt, from the engine's prefix cache
    double reserved = 0;
    bool audit = false;  // kind="audit", no budgets (RequestLabels::audit)
  };
  struct ModelStats {
    double cost_per_work = -1;     // EWMA over finished requests: prices cache savings
    double cost_per_request = -1;  // EWMA: budget reservation for requests in flight
  };

  // AccrualSink (called with mu_ held, from inside the ledger).
  void on_bill(const std::string& model, const std::string& cls, ReplicaState state, bool busy, double t0, double t1,
               double usd) override;
  void on_overhead(const std::string& model, bool idle, double t0, double t1, double usd) override;
  void on_share(std::uint64_t handle, double t0, double t1, double usd) override;

  Request describe(const RequestLabels& labels);
  std::map<std::string, std::string> map_tags(const std::map<std::string, std::string>& raw);
  void charge_request(const Request& r, double t0, double t1, double usd);
  Budgets::Charged charge_budgets(const Request& r, double usd, double t_period);
  // One journal record per settled request or hit: what it added to spend and totals.
  void journal(const Budgets::Charged& charged, double usd, double billed, double saved, bool hit);
  void load_persisted();
  void restore_totals(const boost::json::object& snapshot);
  void note_time(double t) { latest_t_ = std::max(latest_t_, t); }
  void sync_events();  // ledger anomaly counters -> metrics
  double ewma(double old, double sample) const {
    return old < 0 ? sample : old + config_->savings_ewma_alpha * (sample - old);
  }

  std::shared_ptr<const CostConfig> config_;
  std::mutex mu_;
  std::mutex flush_mu_;  // serialises file writes, which happen outside mu_
  CostMetrics metrics_;
  Ledger ledger_;
  Budgets budgets_;
  Buckets buckets_;
  LiveSeries live_;
  AlertDispatcher alerts_;
  SpendJournal journal_;
  std::unordered_map<std::uint64_t, Request> requests_;
  std::unordered_map<std::string, ModelStats> model_stats_;
  std::unordered_map<std::string, std::pair<std::string, ReplicaState>> replica_states_;  // id -> model, state
  std::map<std::string, std::set<std::string>> seen_tag_values_;
  std::uint64_t next_handle_ = 0;
  std::uint64_t clock_regressions_seen_ = 0;
  double latest_t_ = 0;
  CostTotals totals_;
};

}  // namespace tidegate::cost
