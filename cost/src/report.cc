#include <boost/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "buckets.h"
#include "tidegate/common/json_text.h"
#include "tidegate/common/openai_error.h"

namespace tidegate::cost {
using common::format_decimal;
using common::to_json_text;
namespace {

struct Row {
  std::string key;
  Agg agg;
  double idle_usd = 0, standby_usd = 0;
};

// Text figures: money to nine places (what the JSON carries), counts as integers. Never
// %g, which turns 12345678901 tokens into 1.23456789e+10.
std::string usd(double v) { return format_decimal(v, 9); }
std::string count(std::int64_t v) { return std::to_string(v); }
// In sentences a dollar amount to the micro-dollar is plenty.
std::string usd_text(double v) { return format_decimal(v, 6); }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

double per_1k(const Agg& a) {
  const auto tokens = static_cast<double>(a.prompt + a.completion);
  return tokens > 0 ? a.cost / tokens * 1000.0 : 0.0;
}

void add(Agg& into, const Agg& a) {
  into.cost += a.cost;
  into.requests += a.requests;
  into.prompt += a.prompt;
  into.completion += a.completion;
  into.savings += a.savings;
  into.hits += a.hits;
  into.hit_tokens += a.hit_tokens;
}

// Sums money and time; pool figures take the maximum (a window's burst, a bucket's pool).
void add(Infra& into, const Infra& i) {
  into.bill += i.bill;
  into.request_usd += i.request_usd;
  into.idle_usd += i.idle_usd;
  into.standby_usd += i.standby_usd;
  into.active_s += i.active_s;
  into.idle_s += i.idle_s;
  into.max_warm = std::max(into.max_warm, i.max_warm);
  into.promotions = std::max(into.promotions, i.promotions);
}

boost::json::array hints(const std::map<std::string, Infra>& per_model, const CostConfig& config) {
  boost::json::array out;
  for (const auto& [model, m] : per_model) {
    if (m.active_s > 0 && m.idle_s / m.active_s > config.idle_hint_fraction) {
      const double share = m.idle_s / m.active_s;
      out.push_back({{"kind", "idle_replicas"},
                     {"model", model},
                     {"idle_share_of_active_time", share},
                     {"idle_usd", m.idle_usd},
                     {"message", "Active replicas of " + model + " sat idle " + std::to_string(int(share * 100 + 0.5)) +
                                     "% of their active time ($" + usd_text(m.idle_usd) +
                                     "); scale down sooner or lower the minimum replica count."}});
    }
    if (m.max_warm > m.promotions && m.standby_usd > 0) {
      out.push_back({{"kind", "oversized_warm_pool"},
                     {"model", model},
                     {"max_warm_pool", m.max_warm},
                     {"max_promotions_per_window", m.promotions},
                     {"window_s", config.bucket_s},
                     {"standby_usd", m.standby_usd},
                     {"message", "The warm pool of " + model + " held up to " + count(m.max_warm) +
                                     " replicas but at most " + count(m.promotions) + " were promoted within any " +
                                     format_decimal(config.bucket_s) + " s window; a pool of " + count(m.promotions) +
                                     " would have served the same bursts (standby cost $" + usd_text(m.standby_usd) +
                                     ")."}});
    }
  }
  return out;
}

}  // namespace

void Buckets::prune(double now) {
  const auto oldest = index(now - horizon_);
  while (!buckets_.empty() && buckets_.begin()->first < oldest) buckets_.erase(buckets_.begin());
}

std::pair<std::string, std::string> render_report(const Buckets& buckets, const CostConfig& config,
                                                  const std::string& by, double from, double to,
                                                  const std::string& format) {
  const auto error = [](const std::string& msg) {
    return std::pair<std::string, std::string>{
        common::openai_error_body(msg, "invalid_request_error", "invalid_value"),
        "application/json"};
  };
  if (by != "tenant" && by != "model" && by != "tag") return error("by must be tenant, model or tag");
  if (format != "json" && format != "csv") return error("format must be json or csv");
  const std::string prefix = by + ":";
  std::map<std::string, Row> rows;
  std::map<std::string, Infra> models;  // sums for totals and hints; max for pool figures
  for (const auto& [idx, b] : buckets.all()) {
    const double start = static_cast<double>(idx) * buckets.width();
    if (start + buckets.width() <= from || start >= to) continue;
    for (const auto& [key, a] : b.dims) {
      if (key.compare(0, prefix.size(), prefix) != 0) continue;
      auto& row = rows[key.substr(prefix.size())];
      add(row.agg, a);
    }
    for (const auto& [model, i] : b.models) add(models[model], i);
  }
  Infra total;
  for (const auto& [model, m] : models) add(total, m);
  if (by == "model")
    for (const auto& [model, m] : models) {
      rows[model].idle_usd = m.idle_usd;
      rows[model].standby_usd = m.standby_usd;
    }
  std::vector<Row> list;
  for (auto& [k, r] : rows) {
    r.key = k;
    list.push_back(r);
  }
  if (by == "tenant") {  // the shared rows make the cost column add up to the bill
    Row idle{"(idle)", {}, total.idle_usd, 0};
    idle.agg.cost = total.idle_usd;
    Row standby{"(standby)", {}, 0, total.standby_usd};
    standby.agg.cost = total.standby_usd;
    list.push_back(idle);
    list.push_back(standby);
  }
  if (format == "csv") {
    std::ostringstream out;
    out << by << ",requests,prompt_tokens,completion_tokens,tokens,cost_usd,cost_per_1k_tokens,cache_hits,"
               "cache_savings_usd,idle_usd,standby_usd\n";
    for (const auto& r : list)
      out << csv_field(r.key) << ',' << count(r.agg.requests) << ',' << count(r.agg.prompt) << ','
          << count(r.agg.completion) << ',' << count(r.agg.prompt + r.agg.completion) << ',' << usd(r.agg.cost) << ','
          << usd(per_1k(r.agg)) << ',' << count(r.agg.hits) << ',' << usd(r.agg.savings) << ',' << usd(r.idle_usd)
          << ',' << usd(r.standby_usd) << '\n';
    return {out.str(), "text/csv; charset=utf-8"};
  }
  boost::json::array jrows;
  double savings = 0;
  for (const auto& r : list) {
    savings += r.agg.savings;
    jrows.push_back({{by, r.key},
                     {"requests", r.agg.requests},
                     {"prompt_tokens", r.agg.prompt},
                     {"completion_tokens", r.agg.completion},
                     {"tokens", r.agg.prompt + r.agg.completion},
                     {"cost_usd", r.agg.cost},
                     {"cost_per_1k_tokens", per_1k(r.agg)},
                     {"cache_hits", r.agg.hits},
                     {"cache_savings_usd", r.agg.savings},
                     {"idle_usd", r.idle_usd},
                     {"standby_usd", r.standby_usd}});
  }
  boost::json::object body{
      {"by", by},
      {"from", from},
      {"to", to},
      {"bucket_s", buckets.width()},
      {"rows", jrows},
      {"totals",
       {{"bill_usd", total.bill},
        {"request_usd", total.request_usd},
        {"idle_usd", total.idle_usd},
        {"standby_usd", total.standby_usd},
        {"idle_share", total.bill > 0 ? total.idle_usd / total.bill : 0.0},
        {"cache_savings_usd", by == "tag" ? 0.0 : savings}}},
      {"hints", hints(models, config)}};
  return {to_json_text(body), "application/json"};
}

}  // namespace tidegate::cost
