#include "metrics.h"

namespace tidegate::cost {

CostMetrics::CostMetrics(prometheus::Registry& registry, const TagPolicy& tags)
    : tag_labels_(tags.labels),
      bill_(prometheus::BuildCounter()
                .Name("tidegate_replica_cost_usd_total")
                .Help("Replica time at its state's price, plus paid-API and cache-lookup charges: the bill")
                .Register(registry)),
      cost_(prometheus::BuildCounter()
                .Name("tidegate_cost_usd_total")
                .Help("The bill attributed: kind=request (to tenants), audit (the cache's audits), idle, standby; sums to the bill")
                .Register(registry)),
      savings_(prometheus::BuildCounter()
                   .Name("tidegate_cache_savings_usd_total")
                   .Help("Estimated model cost avoided by cache hits")
                   .Register(registry)),
      tokens_(prometheus::BuildCounter().Name("tidegate_tokens_total").Help("Tokens by type").Register(registry)),
      budget_spend_(prometheus::BuildGauge()
                        .Name("tidegate_budget_spend_usd")
                        .Help("Spend in the current budget period")
                        .Register(registry)),
      budget_limit_(prometheus::BuildGauge()
                        .Name("tidegate_budget_limit_usd")
                        .Help("Budget limits by level (soft, hard)")
                        .Register(registry)),
      alerts_(prometheus::BuildCounter()
                  .Name("tidegate_budget_alerts_total")
                  .Help("Budget limits crossed (once per scope, period and level)")
                  .Register(registry)),
      refusals_(prometheus::BuildCounter()
                    .Name("tidegate_budget_refusals_total")
                    .Help("Requests refused by a hard budget limit")
                    .Register(registry)),
      events_(prometheus::BuildCounter()
                  .Name("tidegate_cost_events_total")
                  .Help("Anomalies absorbed by cost accounting (clock regressions, unknown replicas, ...)")
                  .Register(registry)) {}

prometheus::Counter& CostMetrics::counter(prometheus::Family<prometheus::Counter>& family,
                                          const prometheus::Labels& labels) {
  std::string key = std::to_string(reinterpret_cast<std::uintptr_t>(&family));
  for (const auto& [k, v] : labels) {
    key += '\x1f';
    key += v;
  }
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, &family.Add(labels)).first;
  return *it->second;
}

prometheus::Labels CostMetrics::with_tags(prometheus::Labels labels, const std::map<std::string, std::string>& tags) const {
  for (const auto& name : tag_labels_) {
    const auto it = tags.find(name);
    labels[name] = it == tags.end() ? std::string() : it->second;
  }
  return labels;
}

void CostMetrics::bill(const std::string& model, const std::string& cls, const std::string& state, double usd) {
  if (usd > 0) counter(bill_, {{"model", model}, {"class", cls}, {"state", state}}).Increment(usd);
}

void CostMetrics::cost(const std::string& model, const std::string& tenant, const std::string& kind,
                       const std::map<std::string, std::string>& tags, double usd) {
  if (usd > 0) counter(cost_, with_tags({{"model", model}, {"tenant", tenant}, {"kind", kind}}, tags)).Increment(usd);
}

void CostMetrics::savings(const std::string& model, const std::string& tenant, double usd) {
  if (usd > 0) counter(savings_, {{"model", model}, {"tenant", tenant}}).Increment(usd);
}

void CostMetrics::tokens(const std::string& model, const std::string& tenant, const std::string& type,
                         const std::map<std::string, std::string>& tags, double n) {
  if (n > 0) counter(tokens_, with_tags({{"model", model}, {"tenant", tenant}, {"type", type}}, tags)).Increment(n);
}

void CostMetrics::budget(const std::string& scope, const std::string& period, double spend, double soft, double hard) {
  budget_spend_.Add({{"scope", scope}, {"period", period}}).Set(spend);
  if (soft > 0) budget_limit_.Add({{"scope", scope}, {"period", period}, {"level", "soft"}}).Set(soft);
  if (hard > 0) budget_limit_.Add({{"scope", scope}, {"period", period}, {"level", "hard"}}).Set(hard);
}

void CostMetrics::alert(const std::string& scope, const std::string& level) {
  counter(alerts_, {{"scope", scope}, {"level", level}}).Increment();
}

void CostMetrics::refusal(const std::string& scope) { counter(refusals_, {{"scope", scope}}).Increment(); }

void CostMetrics::event(const std::string& reason) { counter(events_, {{"reason", reason}}).Increment(); }

}  // namespace tidegate::cost
