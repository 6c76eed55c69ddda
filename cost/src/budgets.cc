#include "budgets.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tidegate::cost {
namespace {

constexpr const char* kFileName = "budget_spend.json";

std::tm utc(double t) {
  const auto secs = static_cast<std::time_t>(std::floor(t));
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return tm;
}

bool matches(const std::string& pattern, const std::string& value) { return pattern == "*" || pattern == value; }

std::string money(double usd) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "$%.2f", usd);
  return buf;
}

bool write_all(int fd, const std::string& data) {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    const auto n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

std::string period_id(BudgetPeriod p, double t) {
  const auto tm = utc(t);
  char buf[32];
  if (p == BudgetPeriod::kDay) std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
  else std::snprintf(buf, sizeof buf, "%04d-%02d", tm.tm_year + 1900, tm.tm_mon + 1);
  return buf;
}

double period_end(BudgetPeriod p, double t) {
  auto tm = utc(t);
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  if (p == BudgetPeriod::kDay) {
    tm.tm_mday += 1;
  } else {
    tm.tm_mday = 1;
    tm.tm_mon += 1;
  }
  return static_cast<double>(timegm(&tm));  // timegm normalises day/month overflow
}

std::string iso8601(double unix_seconds) {
  const auto tm = utc(unix_seconds);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

std::vector<ScopeRef> Budgets::scopes(const std::string& key_id, const std::string& tenant,
                                      const std::map<std::string, std::string>& mapped_tags) const {
  std::vector<ScopeRef> out;
  for (std::size_t i = 0; i < config_->budgets.size(); ++i) {
    const auto& rule = config_->budgets[i];
    switch (rule.kind) {
      case ScopeKind::kKey:
        if (!key_id.empty() && matches(rule.match, key_id)) out.push_back({i, "key:" + key_id});
        break;
      case ScopeKind::kTenant:
        if (!tenant.empty() && matches(rule.match, tenant)) out.push_back({i, "tenant:" + tenant});
        break;
      case ScopeKind::kTag: {
        const auto it = mapped_tags.find(rule.tag_key);
        if (it != mapped_tags.end() && !it->second.empty() && matches(rule.match, it->second))
          out.push_back({i, "tag:" + rule.tag_key + "=" + it->second});
        break;
      }
    }
  }
  return out;
}

std::string Budgets::spend_key(const ScopeRef& ref, double t) const {
  const auto p = config_->budgets[ref.rule].period;
  // Shared budgets name their period by the store's clock, so gateways with skewed clocks still
  // agree on when a day ends.
  if (shared_) t += shared_->clock_offset();
  return ref.scope + "/" + to_string(p) + "/" + period_id(p, t);
}

void Budgets::set_shared(std::shared_ptr<SharedSpend> shared) {
  shared_ = std::move(shared);
  if (shared_)
    for (const auto& [key, usd] : spend_) shared_->publish(key, usd);
}

double Budgets::committed(const ScopeRef& ref, double t) const {
  const auto r = reserved_.find(ref.scope + "/" + to_string(config_->budgets[ref.rule].period));
  const double reserved = r == reserved_.end() ? 0.0 : r->second;
  const double own = spend(ref, t);
  return shared_ ? shared_->committed(spend_key(ref, t), own, reserved) : own + reserved;
}

double Budgets::spend(const ScopeRef& ref, double t) const {
  const auto it = spend_.find(spend_key(ref, t));
  return it == spend_.end() ? 0.0 : it->second;
}

double Budgets::total_spend(const ScopeRef& ref, double t) const {
  const double own = spend(ref, t);
  return shared_ ? shared_->fleet_total(spend_key(ref, t), own) : own;
}

BudgetDecision Budgets::check(const std::vector<ScopeRef>& refs, double t) const {
  BudgetDecision d;
  for (const auto& ref : refs) {
    const auto& rule = config_->budgets[ref.rule];
    if (rule.hard_usd <= 0) continue;
    const auto period = to_string(rule.period);
    const double committed = this->committed(ref, t);
    if (committed < rule.hard_usd) continue;
    d.allowed = false;
    d.scope = ref.scope + "/" + period;
    d.message = "Budget exceeded for " + ref.scope + ": " + money(committed) + " spent or committed of the " +
                money(rule.hard_usd) + (rule.period == BudgetPeriod::kDay ? " daily" : " monthly") +
                " limit. It resets at " + iso8601(period_end(rule.period, t)) + ".";
    return d;
  }
  return d;
}

void Budgets::reserve(const std::vector<ScopeRef>& refs, double usd) {
  if (usd <= 0) return;
  for (const auto& ref : refs) reserved_[ref.scope + "/" + to_string(config_->budgets[ref.rule].period)] += usd;
}

void Budgets::release(const std::vector<ScopeRef>& refs, double usd) {
  if (usd <= 0) return;
  for (const auto& ref : refs) {
    const auto key = ref.scope + "/" + to_string(config_->budgets[ref.rule].period);
    const auto it = reserved_.find(key);
    if (it == reserved_.end()) continue;
    it->second -= usd;
    if (it->second <= 1e-12) reserved_.erase(it);
  }
}

std::vector<BudgetAlert> Budgets::charge(const std::vector<ScopeRef>& refs, double usd, double t_period,
                                         Charged* charged) {
  std::vector<BudgetAlert> alerts;
  if (usd <= 0) return alerts;
  for (const auto& ref : refs) {
    const auto& rule = config_->budgets[ref.rule];
    const auto key = spend_key(ref, t_period);
    const double own = (spend_[key] += usd);
    if (shared_) shared_->publish(key, own);
    // Alerts follow the fleet's spend: with three gateways each one's own spend may never reach
    // a limit the fleet crossed. (Each gateway still alerts once per period from its own view.)
    const double total = shared_ ? shared_->fleet_total(key, own) : own;
    if (charged) charged->keys.push_back(key);
    const auto fire = [&](const char* level, double limit) {
      if (limit <= 0 || total < limit) return;
      if (!fired_.insert(key + "#" + level).second) return;  // once per period
      if (charged) charged->fired.push_back(key + "#" + level);
      alerts.push_back({ref.scope, to_string(rule.period), period_id(rule.period, t_period), level, total, limit});
    };
    fire("soft", rule.soft_usd);
    fire("hard", rule.hard_usd);
  }
  return alerts;
}

void Budgets::apply(const std::vector<std::string>& keys, double usd, const std::vector<std::string>& fired) {
  for (const auto& k : keys) {
    const double total = (spend_[k] += usd);
    if (shared_) shared_->publish(k, total);
  }
  fired_.insert(fired.begin(), fired.end());
}

boost::json::object Budgets::to_json() const {
  boost::json::object spend;
  for (const auto& [k, v] : spend_) spend[k] = v;
  boost::json::array fired;
  for (const auto& f : fired_) fired.emplace_back(f);
  return {{"version", 1}, {"spend", spend}, {"fired", fired}};
}

void Budgets::restore(const boost::json::object& o) {
  if (const auto* s = o.if_contains("spend"); s && s->is_object())
    for (const auto& [k, val] : s->as_object())
      if (val.is_number()) spend_[std::string(k)] = val.to_number<double>();
  if (const auto* f = o.if_contains("fired"); f && f->is_array())
    for (const auto& x : f->as_array())
      if (x.is_string()) fired_.insert(std::string(x.as_string()));
}

bool Budgets::write(const std::string& dir, const std::string& body, std::string* error) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto final_path = dir + "/" + kFileName;
  const auto tmp_path = final_path + ".tmp";
  const int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = "open " + tmp_path + ": " + std::strerror(errno);
    return false;
  }
  const bool ok = write_all(fd, body) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    *error = "write " + final_path + ": " + std::strerror(errno);
    ::unlink(tmp_path.c_str());
    return false;
  }
  // The rename is durable only once the directory entry is on disk too.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return true;
}

std::optional<boost::json::object> Budgets::read(const std::string& dir, std::string* error) {
  const auto path = dir + "/" + kFileName;
  std::ifstream in(path);
  if (!in) return boost::json::object{};  // first start
  std::stringstream ss;
  ss << in.rdbuf();
  boost::system::error_code ec;
  auto v = boost::json::parse(ss.str(), ec);
  if (ec || !v.is_object()) {
    *error = "unreadable " + path + ": " + (ec ? ec.message() : std::string("not an object"));
    return std::nullopt;
  }
  return std::move(v.as_object());
}

}  // namespace tidegate::cost
