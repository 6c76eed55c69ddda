// SharedSpend on redis::SharedTotals (keys <prefix>:budgets:<scope>/<period>/<id>). The
// budget-specific parts: how long a period's key is kept, a gateway id that survives restarts,
// and a check that every gateway enforces the same budgets.
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tidegate/common/log.h"
#include "tidegate/cost/config.h"
#include "tidegate/cost/shared_spend.h"
#include "tidegate/redis/client.h"
#include "tidegate/redis/config.h"
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

// The budget rules as one stable string hash (FNV-1a), to compare across gateways and builds.
std::string fingerprint(const CostConfig& c) {
  std::string text;
  for (const auto& r : c.budgets) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "|%s|%.6f|%.6f;", to_string(r.period).c_str(), r.soft_usd, r.hard_usd);
    text += scope_name(r) + buf;
  }
  std::uint64_t h = 1469598103934665603ull;
  for (const unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  char out[20];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// Gateways that enforce different budgets on one shared spend disagree on when to refuse (a
// config rolled out to some replicas only). Each gateway writes its budgets' fingerprint with a
// timestamp to HASH <prefix>:budgets:config every few seconds and compares the live ones (seen
// within a minute): a difference is logged once and shown by tidegate_budget_config_disagreement.
class ConfigCheck final : public std::enable_shared_from_this<ConfigCheck> {
 public:
  ConfigCheck(std::shared_ptr<redis::Client> client, std::shared_ptr<const redis::RedisConfig> config, std::string id,
              std::string fingerprint, prometheus::Registry* registry)
      : client_(std::move(client)), key_(config->key_prefix + ":budgets:config"), id_(std::move(id)),
        fingerprint_(std::move(fingerprint)), interval_s_(std::max(1.0, 10 * config->refresh_interval_s)) {
    if (registry)
      gauge_ = &prometheus::BuildGauge().Name("tidegate_budget_config_disagreement")
                    .Help("1 while another live gateway sharing this Redis enforces different budgets")
                    .Register(*registry).Add({});
  }
  void start() {
    boost::asio::post(client_->executor(), [self = shared_from_this()] {
      self->timer_ = std::make_shared<boost::asio::steady_timer>(self->client_->executor());
      self->tick(self->timer_);
    });
  }
  // The timer is the strand's: cancelled there, so the Redis loop need not wait it out at exit.
  void stop() {
    boost::asio::post(client_->executor(), [self = shared_from_this()] {
      if (self->timer_) self->timer_->cancel();
    });
  }

 private:
  static double now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

  void tick(std::shared_ptr<boost::asio::steady_timer> timer) {
    client_->command({"HSET", key_, id_, fingerprint_ + " " + std::to_string(static_cast<long long>(now()))},
                     [](redis::Result) {});
    client_->command({"HGETALL", key_}, [weak = weak_from_this()](redis::Result r) {
      if (auto self = weak.lock(); self && r.ok()) self->compare(r.reply);
    });
    timer->expires_after(std::chrono::duration_cast<boost::asio::steady_timer::duration>(
        std::chrono::duration<double>(interval_s_)));
    timer->async_wait([weak = weak_from_this(), timer](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->tick(timer);
    });
  }

  void compare(const redis::Reply& all) {
    boost::json::array others;
    for (std::size_t i = 0; i + 1 < all.elements.size(); i += 2) {
      const auto& id = all.elements[i].str;
      const auto& value = all.elements[i + 1].str;
      const auto space = value.find(' ');
      if (id == id_ || space == std::string::npos) continue;
      const bool live = now() - std::strtod(value.c_str() + space + 1, nullptr) < 60;
      if (live && value.compare(0, space, fingerprint_) != 0) others.emplace_back(id);
    }
    const bool disagree = !others.empty();
    if (gauge_) gauge_->Set(disagree ? 1 : 0);
    if (disagree == disagreed_) return;
    disagreed_ = disagree;
    if (disagree)
      log::warn("cost.budget_config_disagrees", {{"gateway_id", id_}, {"fingerprint", fingerprint_}, {"others", others},
                                                 {"why", "gateways sharing this Redis enforce different budgets"}});
    else
      log::info("cost.budget_config_agrees", {{"gateway_id", id_}});
  }

  std::shared_ptr<redis::Client> client_;
  std::string key_, id_, fingerprint_;
  double interval_s_;
  prometheus::Gauge* gauge_ = nullptr;
  // The client's strand only:
  std::shared_ptr<boost::asio::steady_timer> timer_;
  bool disagreed_ = false;
};

class RedisSpend final : public SharedSpend {
 public:
  RedisSpend(std::shared_ptr<redis::SharedTotals> totals, std::shared_ptr<ConfigCheck> check)
      : totals_(std::move(totals)), check_(std::move(check)) {}
  ~RedisSpend() override { check_->stop(); }
  void publish(const std::string& key, double own_total) override { totals_->publish(key, own_total); }
  double committed(const std::string& key, double own_total, double reserved) override {
    return totals_->view(key, own_total).effective(own_total, reserved, totals_->expected_gateways());
  }
  double fleet_total(const std::string& key, double own_total) override {
    return totals_->view(key, own_total).effective(own_total, 0, 1);  // N = 1: what is known, no margin
  }
  double clock_offset() const override { return totals_->clock_offset(); }

 private:
  std::shared_ptr<redis::SharedTotals> totals_;
  std::shared_ptr<ConfigCheck> check_;  // lives as long as the spend it watches
};

}  // namespace

std::shared_ptr<SharedSpend> make_redis_shared_spend(std::shared_ptr<redis::Client> client,
                                                     std::shared_ptr<const redis::RedisConfig> config,
                                                     const CostConfig& cost, prometheus::Registry* registry) {
  redis::SharedTotals::Options o;
  o.name = "budgets";
  o.gateway_id = load_or_create_id(cost.data_dir);
  o.ttl_s = ttl_for;
  auto check = std::make_shared<ConfigCheck>(client, config, o.gateway_id, fingerprint(cost), registry);
  check->start();
  return std::make_shared<RedisSpend>(redis::make_shared_totals(std::move(client), std::move(config), std::move(o), registry),
                                      std::move(check));
}

}  // namespace tidegate::cost
