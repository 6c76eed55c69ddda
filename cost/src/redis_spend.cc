// SharedSpend on redis::SharedTotals (keys <prefix>:budgets:<scope>/<period>/<id>). The only
// budget-specific parts: how long a period's key is kept, and a gateway id that survives restarts.
#include <filesystem>
#include <fstream>

#include "tidegate/common/log.h"
#include "tidegate/cost/shared_spend.h"
#include "tidegate/redis/shared_totals.h"

namespace tidegate::cost {
namespace {

// Keys outlive their period long enough for late reports: 3 days for a day, 62 for a month.
long ttl_for(const std::string& key) { return key.find("/day/") != std::string::npos ? 3 * 86400 : 62 * 86400; }

// Stable across restarts of one gateway: its journal restores the spend it published before,
// which must land on the same hash field rather than be counted a second time.
std::string load_or_create_id(const std::string& dir) {
  if (dir.empty()) return redis::random_gateway_id();
  const auto path = dir + "/gateway_id";
  std::string id;
  if (std::ifstream in(path); in && std::getline(in, id) && !id.empty()) return id;
  id = redis::random_gateway_id();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ofstream out(path);
  out << id << "\n";
  if (!out) log::warn("cost.gateway_id_not_saved", {{"path", path}});
  return id;
}

class RedisSpend final : public SharedSpend {
 public:
  explicit RedisSpend(std::shared_ptr<redis::SharedTotals> totals) : totals_(std::move(totals)) {}
  void publish(const std::string& key, double own_total) override { totals_->publish(key, own_total); }
  double committed(const std::string& key, double own_total, double reserved) override {
    return totals_->view(key, own_total).effective(own_total, reserved, totals_->expected_gateways());
  }
  double clock_offset() const override { return totals_->clock_offset(); }

 private:
  std::shared_ptr<redis::SharedTotals> totals_;
};

}  // namespace

std::shared_ptr<SharedSpend> make_redis_shared_spend(std::shared_ptr<redis::Client> client,
                                                     std::shared_ptr<const redis::RedisConfig> config,
                                                     const std::string& data_dir, prometheus::Registry* registry) {
  redis::SharedTotals::Options o;
  o.name = "budgets";
  o.gateway_id = load_or_create_id(data_dir);
  o.ttl_s = ttl_for;
  return std::make_shared<RedisSpend>(redis::make_shared_totals(std::move(client), std::move(config), std::move(o), registry));
}

}  // namespace tidegate::cost
