// The request path: replica states, request lifecycle, cache hits, budget checks.
#include <cmath>

#include "accounting_impl.h"
#include "tidegate/common/log.h"
#include "tidegate/common/openai_error.h"

namespace tidegate::cost {
namespace {
const StateRates kFree{};
}

std::string budget_error_body(const BudgetDecision& decision) {
  return common::openai_error_body(decision.message, "insufficient_quota", "budget_exceeded");
}

std::unique_ptr<CostAccounting> make_cost_accounting(std::shared_ptr<const CostConfig> config,
                                                     prometheus::Registry& registry, std::shared_ptr<SharedSpend> shared) {
  return std::make_unique<CostAccountingImpl>(std::move(config), registry, std::move(shared));
}

CostAccountingImpl::CostAccountingImpl(std::shared_ptr<const CostConfig> config, prometheus::Registry& registry,
                                       std::shared_ptr<SharedSpend> shared)
    : config_(std::move(config)),
      metrics_(registry, config_->tags),
      ledger_(*this),
      budgets_(config_),
      buckets_(config_->bucket_s, config_->horizon_s),
      live_(config_->live_step_s, config_->live_points),
      alerts_(config_->webhook_url, config_->webhook_timeout_s) {
  if (!config_->data_dir.empty()) load_persisted();
  budgets_.set_shared(std::move(shared));  // after the restore: the store gets what the journal holds
}

// The snapshot, then every journal record it does not cover; appends then go to a fresh
// generation, so a torn tail of the old one is never written after.
void CostAccountingImpl::load_persisted() {
  const auto& dir = config_->data_dir;
  std::string error;
  std::uint64_t from = 0;
  if (const auto snapshot = Budgets::read(dir, &error)) {
    budgets_.restore(*snapshot);
    restore_totals(*snapshot);
    if (const auto* f = snapshot->if_contains("journal_from"); f && f->is_number())
      from = static_cast<std::uint64_t>(f->to_number<double>());
  } else {
    // Spend we cannot read is not zero: say so loudly; the journal still restores its part.
    log::error("cost.spend_load_failed", {{"dir", dir}, {"error", error}});
    metrics_.event("spend_load_failed");
  }
  const auto replayed = SpendJournal::replay(dir, from, [this](std::string_view text) {
    boost::system::error_code ec;
    const auto v = boost::json::parse(text, ec);
    if (ec || !v.is_object()) return;
    const auto& o = v.as_object();
    std::vector<std::string> keys, fired;
    if (const auto* k = o.if_contains("k"); k && k->is_array())
      for (const auto& x : k->as_array())
        if (x.is_string()) keys.emplace_back(x.as_string());
    if (const auto* f = o.if_contains("f"); f && f->is_array())
      for (const auto& x : f->as_array())
        if (x.is_string()) fired.emplace_back(x.as_string());
    const auto num = [&o](const char* key) {
      const auto* x = o.if_contains(key);
      return x && x->is_number() ? x->to_number<double>() : 0.0;
    };
    const double usd = num("usd");
    budgets_.apply(keys, usd, fired);
    const bool hit = num("hit") > 0;
    totals_.request_usd += usd;
    totals_.bill_usd += num("bill");  // lookups and API tokens; replica time is in the snapshot
    totals_.cache_savings_usd += num("saved");
    (hit ? totals_.cache_hits : totals_.requests) += 1;
  });
  for (const auto& p : replayed.problems) {
    log::warn("cost.spend_journal_problem", {{"problem", p}});
    metrics_.event("spend_journal_corrupt");
  }
  if (!journal_.open(dir, replayed.next_generation, &error)) {
    log::error("cost.spend_journal_open_failed", {{"dir", dir}, {"error", error}});
    metrics_.event("spend_journal_write_failed");
  }
}

void CostAccountingImpl::restore_totals(const boost::json::object& snapshot) {
  const auto* t = snapshot.if_contains("totals");
  if (!t || !t->is_object()) return;
  const auto& o = t->as_object();
  const auto num = [&o](const char* key) {
    const auto* x = o.if_contains(key);
    return x && x->is_number() ? x->to_number<double>() : 0.0;
  };
  totals_.bill_usd = num("bill_usd");
  totals_.request_usd = num("request_usd");
  totals_.idle_usd = num("idle_usd");
  totals_.standby_usd = num("standby_usd");
  totals_.cache_savings_usd = num("cache_savings_usd");
  totals_.requests = static_cast<std::uint64_t>(num("requests"));
  totals_.cache_hits = static_cast<std::uint64_t>(num("cache_hits"));
}

void CostAccountingImpl::journal(const Budgets::Charged& charged, double usd, double billed, double saved, bool hit) {
  if (!journal_.is_open()) return;
  boost::json::object rec;
  boost::json::array keys, fired;
  for (const auto& k : charged.keys) keys.emplace_back(k);
  for (const auto& f : charged.fired) fired.emplace_back(f);
  rec["k"] = std::move(keys);
  if (!fired.empty()) rec["f"] = std::move(fired);
  rec["usd"] = usd;
  if (billed > 0) rec["bill"] = billed;
  if (saved > 0) rec["saved"] = saved;
  if (hit) rec["hit"] = 1;
  if (!journal_.append(boost::json::serialize(rec))) metrics_.event("spend_journal_write_failed");
}

CostAccountingImpl::~CostAccountingImpl() { flush(); }

std::map<std::string, std::string> CostAccountingImpl::map_tags(const std::map<std::string, std::string>& raw) {
  std::map<std::string, std::string> out;
  for (const auto& name : config_->tags.labels) {
    const auto it = raw.find(name);
    if (it == raw.end() || it->second.empty()) continue;
    const auto fixed = config_->tags.values.find(name);
    if (fixed != config_->tags.values.end()) {
      out[name] = fixed->second.count(it->second) ? it->second : "other";
      continue;
    }
    // No fixed list: the first max_values values seen keep their name, later ones are "other".
    auto& seen = seen_tag_values_[name];
    if (seen.count(it->second) || seen.size() < config_->tags.max_values) {
      seen.insert(it->second);
      out[name] = it->second;
    } else {
      out[name] = "other";
    }
  }
  return out;
}

CostAccountingImpl::Request CostAccountingImpl::describe(const RequestLabels& labels) {
  Request r;
  r.model = labels.model;
  r.audit = labels.audit;
  r.tenant = labels.audit ? kAuditTenant : labels.tenant;
  r.tags = labels.audit ? std::map<std::string, std::string>{} : map_tags(labels.tags);
  r.dims = {"tenant:" + r.tenant, "model:" + r.model};
  for (const auto& [k, v] : r.tags) r.dims.push_back("tag:" + k + "=" + v);
  if (!labels.audit) r.scopes = budgets_.scopes(labels.key_id, labels.tenant, r.tags);
  return r;
}

void CostAccountingImpl::on_bill(const std::string& model, const std::string& cls, ReplicaState state, bool busy,
                                 double t0, double t1, double usd) {
  metrics_.bill(model, cls, std::string(to_string(state)), usd);
  totals_.bill_usd += usd;
  std::int64_t warm = 0;
  if (state == ReplicaState::kWarm)
    for (const auto& [id, ms] : replica_states_) warm += (ms.first == model && ms.second == ReplicaState::kWarm);
  buckets_.spread(t0, t1, [&](Bucket& b, double f) {
    auto& m = b.models[model];
    m.bill += usd * f;
    if (state == ReplicaState::kActive) {
      m.active_s += (t1 - t0) * f;
      if (!busy) m.idle_s += (t1 - t0) * f;
    }
    if (state == ReplicaState::kWarm) m.max_warm = std::max(m.max_warm, warm);
  });
}

void CostAccountingImpl::on_overhead(const std::string& model, bool idle, double t0, double t1, double usd) {
  metrics_.cost(model, kSharedTenant, idle ? "idle" : "standby", {}, usd);
  (idle ? totals_.idle_usd : totals_.standby_usd) += usd;
  buckets_.spread(t0, t1, [&](Bucket& b, double f) { (idle ? b.models[model].idle_usd : b.models[model].standby_usd) += usd * f; });
  live_.add(t0, t1, "cost_tenant", idle ? "(idle)" : "(standby)", usd);
  live_.add(t0, t1, "cost_model", model, usd);
}

void CostAccountingImpl::on_share(std::uint64_t handle, double t0, double t1, double usd) {
  const auto it = requests_.find(handle);
  if (it == requests_.end()) return;  // cannot happen: a request outlives its segments
  charge_request(it->second, t0, t1, usd);
}

void CostAccountingImpl::charge_request(const Request& r, double t0, double t1, double usd) {
  metrics_.cost(r.model, r.tenant, r.audit ? "audit" : "request", r.tags, usd);
  totals_.request_usd += usd;
  buckets_.spread(t0, t1, [&](Bucket& b, double f) {
    for (const auto& d : r.dims) b.dims[d].cost += usd * f;
    b.models[r.model].request_usd += usd * f;
  });
  live_.add(t0, t1, "cost_tenant", r.tenant, usd);
  live_.add(t0, t1, "cost_model", r.model, usd);
}

Budgets::Charged CostAccountingImpl::charge_budgets(const Request& r, double usd, double t_period) {
  Budgets::Charged charged;
  if (r.scopes.empty()) return charged;
  const auto fired = budgets_.charge(r.scopes, usd, t_period, &charged);
  for (const auto& ref : r.scopes) {
    const auto& rule = config_->budgets[ref.rule];
    metrics_.budget(ref.scope, to_string(rule.period), budgets_.total_spend(ref, t_period), rule.soft_usd,
                    rule.hard_usd);
  }
  for (const auto& a : fired) {
    metrics_.alert(a.scope, a.level);
    alerts_.post({{"event", "budget_" + a.level + "_limit"},
                  {"scope", a.scope},
                  {"period", a.period},
                  {"period_id", a.period_id},
                  {"spend_usd", a.spend_usd},
                  {"limit_usd", a.limit_usd}});
  }
  return charged;
}

void CostAccountingImpl::sync_events() {
  const auto regressions = ledger_.stats().clock_regressions;
  for (; clock_regressions_seen_ < regressions; ++clock_regressions_seen_) metrics_.event("clock_regression");
}

void CostAccountingImpl::replica_state(const std::string& replica_id, const std::string& model,
                                       const std::string& replica_class, ReplicaState state, double t) {
  std::lock_guard lock(mu_);
  note_time(t);
  std::string cls = replica_class;
  if (cls.empty())
    if (const auto it = config_->model_classes.find(model); it != config_->model_classes.end()) cls = it->second;
  const auto cit = config_->replica_classes.find(cls);
  // Tracked at price 0; an API model's endpoint has no class to know (its calls are priced per token).
  if (cit == config_->replica_classes.end() && !config_->api_models.count(model)) metrics_.event("unknown_replica_class");
  const auto previous =
      ledger_.set_state(replica_id, model, cls, cit == config_->replica_classes.end() ? kFree : cit->second.usd_per_second,
                        state, t);
  if (state == ReplicaState::kStopped) replica_states_.erase(replica_id);
  else replica_states_[replica_id] = {model, state};
  std::map<std::string, double> by_state{{"starting", 0}, {"warm", 0}, {"active", 0}, {"draining", 0}, {"standby", 0}};
  std::int64_t warm = 0;
  for (const auto& [id, ms] : replica_states_) {
    by_state[std::string(to_string(ms.second))] += 1;
    warm += (ms.first == model && ms.second == ReplicaState::kWarm);
  }
  for (const auto& [name, n] : by_state) live_.set(t, "replicas", name, n);
  auto& infra = buckets_.infra(t, model);
  infra.max_warm = std::max(infra.max_warm, warm);
  if (previous == ReplicaState::kWarm && state == ReplicaState::kActive) infra.promotions += 1;
  sync_events();
}

std::uint64_t CostAccountingImpl::request_started(const RequestLabels& labels, const std::string& replica_id, double t) {
  std::lock_guard lock(mu_);
  note_time(t);
  const auto handle = ++next_handle_;
  Request r = describe(labels);
  r.t_start = t;
  // A model in api_models is priced per token whatever serves it: the gateway also lists its
  // endpoint as a replica (registered at price 0), and billing that replica's time first made
  // every call to a paid API cost $0 while its cache hits still saved the list price.
  if (config_->api_models.count(labels.model)) {
    r.billing = Billing::kApi;
  } else if (ledger_.start(handle, replica_id, t)) {
    r.billing = Billing::kReplica;
  } else {
    metrics_.event("unknown_replica");  // served, but nobody told us what that replica costs
  }
  if (const auto ms = model_stats_.find(r.model); ms != model_stats_.end() && ms->second.cost_per_request > 0) {
    r.reserved = ms->second.cost_per_request;
    budgets_.reserve(r.scopes, r.reserved);
  }
  requests_.emplace(handle, std::move(r));
  return handle;
}

void CostAccountingImpl::request_progress(std::uint64_t handle, std::int64_t prompt_tokens,
                                          std::int64_t completion_tokens, double t, std::int64_t cached_prompt_tokens) {
  std::lock_guard lock(mu_);
  note_time(t);
  const auto it = requests_.find(handle);
  if (it == requests_.end()) {
    metrics_.event("unknown_handle");
    return;
  }
  Request& r = it->second;
  const double p = std::max(r.prompt, static_cast<double>(prompt_tokens));
  const double c = std::max(r.completion, static_cast<double>(completion_tokens));
  if (p > prompt_tokens || c > completion_tokens) metrics_.event("progress_regression");
  metrics_.tokens(r.model, r.tenant, "prompt", r.tags, p - r.prompt);
  metrics_.tokens(r.model, r.tenant, "completion", r.tags, c - r.completion);
  for (const auto& d : r.dims) {
    auto& a = buckets_.dim(t, d);
    a.prompt += static_cast<std::int64_t>(p - r.prompt);  // whole token counts, exact in a double
    a.completion += static_cast<std::int64_t>(c - r.completion);
  }
  live_.add(t, t, "tokens", "prompt", p - r.prompt);
  live_.add(t, t, "tokens", "completion", c - r.completion);
  r.prompt = p;
  r.completion = c;
  // The engine's count of cached prompt tokens arrives with its usage, once; it only lowers the
  // work (never below what the uncached prompt and the completion already did).
  r.cached = std::clamp(std::max(r.cached, static_cast<double>(cached_prompt_tokens)), 0.0, p);
  if (r.billing == Billing::kReplica) ledger_.progress(handle, config_->work(p, c, r.cached), t);
  sync_events();
}

double CostAccountingImpl::request_finished(std::uint64_t handle, double t) {
  std::lock_guard lock(mu_);
  note_time(t);
  const auto it = requests_.find(handle);
  if (it == requests_.end()) {
    metrics_.event("unknown_handle");
    return 0;
  }
  const Request& r = it->second;
  double cost = 0;
  if (r.billing == Billing::kReplica) {
    cost = ledger_.finish(handle, t);
  } else if (r.billing == Billing::kApi) {
    const auto& price = config_->api_models.at(r.model);
    cost = (r.prompt * price.input_usd_per_1m + r.completion * price.output_usd_per_1m) / 1e6;
    metrics_.bill(r.model, "api", "active", cost);
    totals_.bill_usd += cost;
    buckets_.infra(t, r.model).bill += cost;
    charge_request(r, t, t, cost);
  }
  for (const auto& d : r.dims) buckets_.dim(t, d).requests += 1;
  live_.add(t, t, "requests", r.model, 1);
  live_.add(t, t, "model_calls", r.model, 1);
  totals_.requests += 1;
  auto& ms = model_stats_[r.model];
  const double work = config_->work(r.prompt, r.completion);
  if (work > 0 && r.billing != Billing::kNone) ms.cost_per_work = ewma(ms.cost_per_work, cost / work);
  if (r.billing != Billing::kNone) ms.cost_per_request = ewma(ms.cost_per_request, cost);
  budgets_.release(r.scopes, r.reserved);
  journal(charge_budgets(r, cost, r.t_start), cost, r.billing == Billing::kApi ? cost : 0.0, 0, false);
  requests_.erase(it);
  buckets_.prune(latest_t_);
  sync_events();
  return cost;
}

double CostAccountingImpl::cache_hit(const RequestLabels& labels, std::int64_t prompt_tokens,
                                     std::int64_t completion_tokens, double t, double* saving) {
  std::lock_guard lock(mu_);
  note_time(t);
  const Request r = describe(labels);
  const double p = static_cast<double>(std::max<std::int64_t>(0, prompt_tokens));
  const double c = static_cast<double>(std::max<std::int64_t>(0, completion_tokens));
  double avoided = 0;
  if (const auto api = config_->api_models.find(r.model); api != config_->api_models.end()) {
    avoided = (p * api->second.input_usd_per_1m + c * api->second.output_usd_per_1m) / 1e6;
  } else if (const auto ms = model_stats_.find(r.model); ms != model_stats_.end() && ms->second.cost_per_work > 0) {
    avoided = ms->second.cost_per_work * config_->work(p, c);
  } else {
    metrics_.event("saving_without_history");  // no finished request of this model to price from
  }
  const double cost = config_->cache_lookup_usd;
  metrics_.bill(r.model, "gateway", "active", cost);
  totals_.bill_usd += cost;
  buckets_.infra(t, r.model).bill += cost;
  charge_request(r, t, t, cost);
  metrics_.savings(r.model, r.tenant, avoided);
  metrics_.tokens(r.model, r.tenant, "cached", r.tags, p + c);
  for (const auto& d : r.dims) {
    auto& a = buckets_.dim(t, d);
    a.hits += 1;
    a.hit_tokens += static_cast<std::int64_t>(p + c);
    a.savings += avoided;
  }
  live_.add(t, t, "requests", r.model, 1);
  live_.add(t, t, "cache_hits", r.model, 1);
  live_.add(t, t, "savings", r.model, avoided);
  totals_.cache_savings_usd += avoided;
  totals_.cache_hits += 1;
  journal(charge_budgets(r, cost, t), cost, cost, avoided, true);
  if (saving) *saving = avoided;
  return cost;
}

BudgetDecision CostAccountingImpl::check_budget(const RequestLabels& labels, double t) {
  std::lock_guard lock(mu_);
  note_time(t);
  if (config_->budgets.empty()) return {};
  const auto scopes = describe(labels).scopes;
  const auto d = budgets_.check(scopes, t);
  if (!d.allowed) metrics_.refusal(d.scope);
  if (budgets_.shared())  // the others' spend moves the gauge too, not only this gateway's charges
    for (const auto& ref : scopes) {
      const auto& rule = config_->budgets[ref.rule];
      metrics_.budget(ref.scope, to_string(rule.period), budgets_.total_spend(ref, t), rule.soft_usd, rule.hard_usd);
    }
  return d;
}

}  // namespace tidegate::cost
