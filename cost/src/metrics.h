#pragma once
// Prometheus families of cost accounting. Counter pointers are cached by label values so the
// request path does one hash lookup, not a family walk. Not thread-safe on its own: callers
// hold CostAccounting's lock.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "tidegate/cost/config.h"

namespace tidegate::cost {

class CostMetrics final {
 public:
  CostMetrics(prometheus::Registry& registry, const TagPolicy& tags);

  void bill(const std::string& model, const std::string& cls, const std::string& state, double usd);
  // kind: request, idle, standby. `tags` are already mapped to the allow-list.
  void cost(const std::string& model, const std::string& tenant, const std::string& kind,
            const std::map<std::string, std::string>& tags, double usd);
  void savings(const std::string& model, const std::string& tenant, double usd);
  void tokens(const std::string& model, const std::string& tenant, const std::string& type,
              const std::map<std::string, std::string>& tags, double n);
  void budget(const std::string& scope, const std::string& period, double spend, double soft, double hard);
  void alert(const std::string& scope, const std::string& level);
  void refusal(const std::string& scope);
  void event(const std::string& reason);  // anomalies handled on the data path

 private:
  prometheus::Counter& counter(prometheus::Family<prometheus::Counter>& family, const prometheus::Labels& labels);
  prometheus::Labels with_tags(prometheus::Labels labels, const std::map<std::string, std::string>& tags) const;

  std::vector<std::string> tag_labels_;
  prometheus::Family<prometheus::Counter>& bill_;
  prometheus::Family<prometheus::Counter>& cost_;
  prometheus::Family<prometheus::Counter>& savings_;
  prometheus::Family<prometheus::Counter>& tokens_;
  prometheus::Family<prometheus::Gauge>& budget_spend_;
  prometheus::Family<prometheus::Gauge>& budget_limit_;
  prometheus::Family<prometheus::Counter>& alerts_;
  prometheus::Family<prometheus::Counter>& refusals_;
  prometheus::Family<prometheus::Counter>& events_;
  std::unordered_map<std::string, prometheus::Counter*> cache_;
};

}  // namespace tidegate::cost
