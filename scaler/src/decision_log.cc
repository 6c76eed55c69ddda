#include "decision_log.h"

#include <cmath>
#include <cstdio>
#include <ctime>

namespace tidegate::scaler {
namespace json = boost::json;
namespace {

// Same outcome, so nothing worth a record of its own; the numbers in the reason may differ.
bool same_hold(const Decision& a, const Decision& b) {
  return a.direction == Direction::kHold && b.direction == Direction::kHold && a.desired == b.desired &&
         a.active == b.active && a.starting == b.starting && a.reason_code == b.reason_code &&
         a.desired_tiers == b.desired_tiers && a.panic == b.panic;
}

json::object signals_json(const Signals& s) {
  json::object o;
  auto put = [&](const char* k, const std::optional<double>& v) { o[k] = v ? json::value(*v) : json::value(nullptr); };
  put("concurrency", s.concurrency);
  put("queue", s.queue);
  put("gpu_util", s.gpu_util);
  put("kv_usage", s.kv_usage);
  put("arrivals", s.arrivals);
  put("arrival_prompt_tokens", s.arrival_prompt_tokens);
  put("prefix_hit_ratio", s.prefix_hit_ratio);
  put("prefill_backlog_tokens", s.prefill_backlog_tokens);
  put("kv_used_tokens", s.kv_used_tokens);
  put("in_flight", s.in_flight);
  put("ttft_met", s.ttft_met);
  put("ttft_total", s.ttft_total);
  return o;
}

}  // namespace

void DecisionLog::push(Decision d, double wall_s, bool actuated) {
  if (!records_.empty() && records_.back().actuated == actuated && same_hold(records_.back().decision, d)) {
    auto& r = records_.back();
    r.decision = std::move(d);
    r.wall_s = wall_s;
    ++r.count;
    return;
  }
  DecisionRecord r;
  r.first_t = d.t;
  r.first_wall_s = r.wall_s = wall_s;
  r.actuated = actuated;
  r.decision = std::move(d);
  records_.push_back(std::move(r));
  while (records_.size() > kept_) {
    // The oldest hold goes first (never the newest record); only a list of real decisions
    // loses its oldest one.
    auto it = records_.begin();
    while (it + 1 != records_.end() && it->decision.direction != Direction::kHold) ++it;
    if (it + 1 == records_.end()) it = records_.begin();
    records_.erase(it);
  }
}

std::string iso8601_utc(double unix_s) {
  double whole = std::floor(unix_s);
  int ms = static_cast<int>(std::lround((unix_s - whole) * 1000));
  if (ms == 1000) whole += 1, ms = 0;
  const std::time_t t = static_cast<std::time_t>(whole);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buf[96];  // roomy: the compiler sizes every field at its int maximum
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, ms);
  return buf;
}

json::object decision_record_json(const DecisionRecord& r) {
  const Decision& d = r.decision;
  json::array tiers;
  for (int n : d.desired_tiers) tiers.push_back(n);
  json::value work = nullptr;
  if (d.work)
    work = json::object{{"demand_replicas", d.work->demand},
                        {"service_s", d.work->service_s},
                        {"service_cv2", d.work->service_cv2},
                        {"burst_margin_replicas", d.work->burst_margin},
                        {"peak_replicas", d.work->peak},
                        {"slo_headroom", d.work->headroom},
                        {"queueing_miss_budget", d.work->queueing_budget},
                        {"ttft_attainment", d.work->attainment ? json::value(*d.work->attainment) : json::value(nullptr)},
                        {"for_demand", d.work->for_demand},
                        {"for_plan", d.work->for_plan}};
  json::array sigs;
  for (const auto& s : d.signals)
    sigs.push_back(json::object{{"signal", s.signal},
                                {"stable_value", s.stable_value},
                                {"panic_value", s.panic_value},
                                {"target", s.target},
                                {"stable_desired", s.stable_desired},
                                {"panic_desired", s.panic_desired},
                                {"within_tolerance", s.within_tolerance}});
  return json::object{{"t", r.wall_s},
                      {"time", iso8601_utc(r.wall_s)},
                      {"t_monotonic", d.t},
                      {"count", r.count},
                      {"actuated", r.actuated},
                      {"first_t", r.first_wall_s},
                      {"first_time", iso8601_utc(r.first_wall_s)},
                      {"first_t_monotonic", r.first_t},
                      {"active", d.active},
                      {"starting", d.starting},
                      {"desired", d.desired},
                      {"direction", std::string(to_string(d.direction))},
                      {"panic", d.panic},
                      {"reason_code", d.reason_code},
                      {"reason", d.reason},
                      {"inputs", signals_json(d.inputs)},
                      {"signals", std::move(sigs)},
                      {"desired_tiers", std::move(tiers)},
                      {"work", std::move(work)}};
}

}  // namespace tidegate::scaler
