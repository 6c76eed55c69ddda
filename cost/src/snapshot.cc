// The read side: reports, the dashboard snapshot, totals and persistence.
#include <unistd.h>

#include "accounting_impl.h"
#include "tidegate/common/log.h"

namespace tidegate::cost {
namespace {

boost::json::object series(const char* title, const char* unit, boost::json::object lines, bool stacked = false) {
  return {{"title", title}, {"unit", unit}, {"stacked", stacked}, {"lines", std::move(lines)}};
}

}  // namespace

void CostAccountingImpl::advance(double t) {
  std::lock_guard lock(mu_);
  note_time(t);
  ledger_.advance(t);
  buckets_.prune(latest_t_);
}

CostTotals CostAccountingImpl::totals() {
  std::lock_guard lock(mu_);
  CostTotals out = totals_;
  out.pending_usd = ledger_.stats().pending_usd;
  out.in_flight = requests_.size();
  out.clock_regressions = ledger_.stats().clock_regressions;
  out.estimated_members = ledger_.stats().estimated_members;
  return out;
}

std::pair<std::string, std::string> CostAccountingImpl::report(const std::string& by, std::optional<double> from,
                                                               std::optional<double> to, const std::string& format) {
  std::lock_guard lock(mu_);
  ledger_.advance(latest_t_);  // idle time up to now belongs in the report
  const double end = to.value_or(latest_t_ + config_->bucket_s);
  const double start = from.value_or(end - config_->horizon_s);
  return render_report(buckets_, *config_, by, start, end, format);
}

boost::json::object CostAccountingImpl::dashboard_snapshot(double t) {
  std::lock_guard lock(mu_);
  note_time(t);
  ledger_.advance(t);
  const auto& st = ledger_.stats();
  boost::json::object s;
  s["requests_per_s"] = series("Requests / s", "req/s", live_.rate_lines("requests", t, 1.0));
  s["cost_by_tenant"] = series("Cost by tenant", "$/h", live_.rate_lines("cost_tenant", t, 3600.0), true);
  s["cost_by_model"] = series("Cost by model", "$/h", live_.rate_lines("cost_model", t, 3600.0), true);
  s["cache_savings"] = series("Cache savings", "$/h", live_.rate_lines("savings", t, 3600.0), true);
  s["cache_hit_ratio"] = series("Cache hit ratio", "ratio", live_.ratio_lines("cache_hits", "model_calls", t));
  s["replicas_by_state"] = series("Replicas by state", "replicas", live_.gauge_lines("replicas", t), true);
  s["tokens_per_s"] = series("Tokens / s", "tok/s", live_.rate_lines("tokens", t, 1.0));
  const double bill = totals_.bill_usd;
  return {{"version", 1},
          {"t", t},
          {"step_s", live_.step()},
          {"window_s", live_.step() * config_->live_points},
          {"totals",
           {{"bill_usd", bill},
            {"request_usd", totals_.request_usd},
            {"idle_usd", totals_.idle_usd},
            {"standby_usd", totals_.standby_usd},
            {"pending_usd", st.pending_usd},
            {"idle_share", bill > 0 ? totals_.idle_usd / bill : 0.0},
            {"cache_savings_usd", totals_.cache_savings_usd},
            {"requests", totals_.requests},
            {"cache_hits", totals_.cache_hits},
            {"in_flight", requests_.size()},
            {"clock_regressions", st.clock_regressions}}},
          {"series", std::move(s)}};
}

// Rotate, snapshot, then trim: the snapshot says which journal generation follows it, and
// older journals go only once it is on disk (spend_journal.h).
void CostAccountingImpl::flush() {
  if (config_->data_dir.empty()) return;
  std::lock_guard flush_lock(flush_mu_);
  std::string body, error;
  std::uint64_t from;
  {
    std::lock_guard lock(mu_);
    const auto before = journal_.generation();
    from = journal_.rotate(&error);
    if (journal_.is_open() && from == before) {
      // Still appending to the old file: a snapshot now would count its records twice.
      log::error("cost.spend_save_failed", {{"dir", config_->data_dir}, {"error", error}});
      metrics_.event("spend_save_failed");
      return;
    }
    auto o = budgets_.to_json();
    o["journal_from"] = from;
    o["totals"] = {{"bill_usd", totals_.bill_usd},
                   {"request_usd", totals_.request_usd},
                   {"idle_usd", totals_.idle_usd},
                   {"standby_usd", totals_.standby_usd},
                   {"cache_savings_usd", totals_.cache_savings_usd},
                   {"requests", totals_.requests},
                   {"cache_hits", totals_.cache_hits}};
    body = boost::json::serialize(o);
  }
  if (!Budgets::write(config_->data_dir, body, &error)) {
    log::error("cost.spend_save_failed", {{"dir", config_->data_dir}, {"error", error}});
    std::lock_guard lock(mu_);
    metrics_.event("spend_save_failed");
    return;
  }
  std::lock_guard lock(mu_);
  journal_.remove_below(from);
}

// fdatasync takes milliseconds: on a duplicate of the descriptor, outside the lock the
// request path takes.
void CostAccountingImpl::sync() {
  int fd;
  bool dir_too;
  std::string dir;
  {
    std::lock_guard lock(mu_);
    fd = journal_.take_sync_fd(&dir_too);
    if (dir_too) dir = journal_.dir();
  }
  if (fd < 0) return;
  bool ok = ::fdatasync(fd) == 0;
  ::close(fd);
  if (dir_too) ok = SpendJournal::fsync_dir(dir) && ok;
  if (!ok) {
    std::lock_guard lock(mu_);
    metrics_.event("spend_journal_write_failed");
  }
}

bool CostAccountingImpl::wait_alerts_idle(double timeout_s) { return alerts_.wait_idle(timeout_s); }

}  // namespace tidegate::cost
