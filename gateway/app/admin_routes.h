#pragma once
// Admin and dashboard routes of the composed gateway. Admin routes need the admin key
// (when one is configured); the dashboard is read-only and served to anyone who can reach
// the gateway's listen address.
#include <memory>

#include "dashboard_feed.h"
#include "tidegate/cache/semantic_cache.h"
#include "tidegate/cost/accounting.h"
#include "tidegate/gateway/gateway.h"
#include "tidegate/scaler/scaler.h"

namespace tidegate::app {

struct Components {
  std::shared_ptr<cache::SemanticCache> cache;      // may be null (cache off)
  std::shared_ptr<cost::CostAccounting> accounting; // may be null (no cost section)
  std::shared_ptr<scaler::Scaler> scaler;           // may be null (no scaler section)
  std::shared_ptr<DashboardFeed> dashboard;
};

void add_admin_routes(gateway::Gateway& gw, const Components& c);

// Parses "a=1&b=two" (percent-decoded); repeated keys keep the last value.
std::map<std::string, std::string> parse_query(const std::string& query);

}  // namespace tidegate::app
