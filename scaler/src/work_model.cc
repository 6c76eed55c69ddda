#include "work_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "queueing.h"
#include "target_tracking.h"

namespace tidegate::scaler::detail {
namespace {

constexpr double kBucketS = 5;         // resolution of the demand history
constexpr double kMinTtftSamples = 20; // fewer first tokens in the window: no attainment yet

struct Window {
  double span = 0, arrivals = 0, tokens = 0;
};

Window window(const std::deque<PolicyState::WorkSample>& work, double since) {
  Window w;
  for (const auto& s : work) {
    if (s.t <= since) continue;
    w.span += s.dt;
    w.arrivals += s.arrivals;
    w.tokens += s.tokens;
  }
  return w;
}

void record_history(const PolicyConfig& cfg, PolicyState& st, double t, double load, double cold_start_s) {
  if (st.bucket_start < 0) st.bucket_start = t;
  if (t - st.bucket_start >= kBucketS && st.bucket_n > 0) {
    st.history.emplace_back(st.bucket_start, st.bucket_sum / st.bucket_n);
    st.bucket_start = t;
    st.bucket_sum = 0;
    st.bucket_n = 0;
  }
  st.bucket_sum += load;
  ++st.bucket_n;
  const double keep = std::max(cfg.burst_memory_s, cfg.predictive_period_s + cold_start_s + cfg.slo.ttft_s + kBucketS);
  while (!st.history.empty() && st.history.front().first < t - keep) st.history.pop_front();
}

std::string num(double v, int decimals = 2) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

double largest_swing(const std::deque<std::pair<double, double>>& samples, double horizon_s) {
  // Sliding-window max and min with monotone deques: O(n).
  std::deque<std::size_t> hi, lo;
  double best = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    while (samples[i].first - samples[start].first > horizon_s) ++start;
    while (!hi.empty() && samples[hi.back()].second <= samples[i].second) hi.pop_back();
    while (!lo.empty() && samples[lo.back()].second >= samples[i].second) lo.pop_back();
    hi.push_back(i);
    lo.push_back(i);
    while (hi.front() < start) hi.pop_front();
    while (lo.front() < start) lo.pop_front();
    best = std::max(best, samples[hi.front()].second - samples[lo.front()].second);
  }
  return best;
}

std::vector<std::size_t> usable_tiers(const PolicyConfig& cfg, double cold_start_s) {
  std::vector<std::size_t> idx(cfg.tiers.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return cfg.tiers[a].promotion_s != cfg.tiers[b].promotion_s ? cfg.tiers[a].promotion_s < cfg.tiers[b].promotion_s
                                                                 : cfg.tiers[a].price_fraction < cfg.tiers[b].price_fraction;
  });
  std::vector<std::size_t> out;
  double cheapest_faster = 1.0;  // an active replica: promotion 0, full price
  for (const auto i : idx) {
    const auto& tier = cfg.tiers[i];
    if (tier.promotion_s >= cold_start_s || tier.price_fraction >= cheapest_faster) continue;
    out.push_back(i);
    cheapest_faster = tier.price_fraction;
  }
  return out;
}

WorkPlan plan_work(const PolicyConfig& cfg, PolicyState& st, const PolicyInput& in, double cold_start_s) {
  WorkPlan out;
  out.tiers.assign(cfg.tiers.size(), 0);
  const Signals& s = in.signals;
  const double dt = st.prev_t >= 0 ? std::max(0.0, in.t - st.prev_t) : 1.0;
  if (s.arrivals && s.arrival_prompt_tokens) {
    st.work.push_back({in.t, dt, std::max(0.0, *s.arrivals), std::max(0.0, *s.arrival_prompt_tokens), s.prefix_hit_ratio});
    st.last_work_t = in.t;
  }
  if (s.ttft_total && *s.ttft_total > 0)
    st.ttft.push_back({in.t, {std::clamp(s.ttft_met.value_or(0), 0.0, *s.ttft_total), *s.ttft_total}});
  const double keep = std::max(cfg.demand_window_s, cfg.demand_short_window_s);
  while (!st.work.empty() && st.work.front().t <= in.t - keep) st.work.pop_front();
  while (!st.ttft.empty() && st.ttft.front().first <= in.t - cfg.slo.window_s) st.ttft.pop_front();

  if (st.last_work_t < 0) return out;  // never had work signals: the work model has no say
  out.any = true;
  if (in.t - st.last_work_t > cfg.demand_window_s) {
    // The signal stopped (a gateway or exporter down mid-burst): never scale down on no data.
    out.lost = true;
    out.active = std::max(st.last_active_plan, in.active);
    out.reason_code = "signal_lost";
    out.reason = "no work signals for " + num(in.t - st.last_work_t, 0) + "s: holding " + std::to_string(out.active);
    return out;
  }

  // ---- demand now ----------------------------------------------------------------------
  const Window wl = window(st.work, in.t - cfg.demand_window_s);
  const Window ws = window(st.work, in.t - cfg.demand_short_window_s);
  double hit_sum = 0;
  int hit_n = 0;
  for (const auto& w : st.work)
    if (w.hit_ratio) hit_sum += *w.hit_ratio, ++hit_n;
  if (hit_n) st.hit_ratio = std::clamp(hit_sum / hit_n, 0.0, 0.99);
  if (wl.arrivals > 0) st.mean_prompt = wl.tokens / wl.arrivals;
  const auto& cap = cfg.capacity;
  const double h = st.hit_ratio, p = st.mean_prompt;
  // Mean prefill seconds of a request: its uncached tokens at the prefill rate, each dearer by
  // the context it attends to (the cached prefix plus half its own part, with E[P^2] ~ 2 E[P]^2),
  // on the share of a saturated replica's time that prefill gets.
  const double attention = cap.attention_context_tokens > 0 ? (1 + h) * p / cap.attention_context_tokens : 0;
  const double x = p > 0 ? (1 - h) * p / cap.prefill_tokens_per_s * (1 + attention) / (1 - cap.overhead) : 0;
  const double lam_l = wl.span > 0 ? wl.arrivals / wl.span : 0;
  const double lam_s = ws.span > 0 ? ws.arrivals / ws.span : 0;
  // The short window counts only when it is above the long one by more than its own noise
  // (prompt sizes and Poisson arrivals: relative standard error ~ sqrt(2 / n)).
  const double short_noise = ws.arrivals > 0 ? std::sqrt(2.0 / ws.arrivals) : 1.0;
  const double d_now = std::max(lam_l * x, lam_s * x * std::max(0.0, 1 - cfg.noise_z * short_noise));
  record_history(cfg, st, in.t, d_now, cold_start_s);

  // ---- SLO loop: measured attainment over the window ------------------------------------
  double met = 0, total = 0;
  for (const auto& [t, mt] : st.ttft) met += mt.first, total += mt.second;
  double headroom = 1;
  if (total >= kMinTtftSamples) {
    out.view.attainment = met / total;
    const double budget = 1 - cfg.slo.attainment;
    if (*out.view.attainment < cfg.slo.attainment && budget > 0)
      headroom = std::min(cfg.max_headroom,
                          1 + cfg.headroom_gain * std::min(4.0, (cfg.slo.attainment - *out.view.attainment) / budget));
  }
  const double d = d_now * headroom;

  // ---- replicas for a load ---------------------------------------------------------------
  const double tau = std::max(0.0, cfg.slo.ttft_s - cap.step_s);  // a request first waits for a step
  const double eps = std::max(1e-6, (1 - cfg.slo.attainment) / 2);  // half the miss budget to queueing
  const int max_c = std::max(1, cfg.max_replicas) * 4 + 16;
  auto for_load = [&](double load) -> int {
    if (!(load > 0)) return 0;
    if (!(x > 0)) return ceil_count(load);
    return queueing::servers_for(load, tau / x, eps, max_c);
  };
  const int c_prefill = for_load(d);
  int base = c_prefill;
  std::string bound = "prefill";
  if (cap.kv_tokens && s.kv_used_tokens && *cap.kv_tokens > 0) {
    const int c_kv = ceil_count(*s.kv_used_tokens / (*cap.kv_tokens * cap.kv_target));
    if (c_kv > base) base = c_kv, bound = "KV";
  }
  if (cap.max_in_flight && *cap.max_in_flight > 0 && (s.in_flight || s.queue)) {
    const int c_slots = ceil_count((s.in_flight.value_or(0) + s.queue.value_or(0)) / (*cap.max_in_flight * cap.in_flight_target));
    if (c_slots > base) base = c_slots, bound = "in-flight slots";
  }
  if (s.prefill_backlog_tokens && p > 0 && tau > 0 && x > 0) {
    // What is already waiting must be prefilled within the SLO, whatever arrives next.
    const double backlog_s = *s.prefill_backlog_tokens * (x / ((1 - h) * p));
    const int c_backlog = ceil_count(backlog_s / tau);
    if (c_backlog > base) base = c_backlog, bound = "backlog";
  }

  // ---- burst memory: what a swing within a promotion or cold start would need -----------
  double peak = d_now;
  for (const auto& [t, v] : st.history) peak = std::max(peak, v);
  auto series = st.history;
  series.emplace_back(in.t, d_now);
  // Noise on the remembered load (a demand_window mean), so that Poisson jitter is no burst.
  const double n_window = std::max(1.0, lam_l * cfg.demand_window_s);
  const double swing_noise = cfg.noise_z * std::sqrt(2.0) * std::sqrt(2.0 / n_window) * peak;
  auto load_within = [&](double horizon) {
    const double swing = std::max(0.0, largest_swing(series, std::max(horizon, kBucketS)) - swing_noise);
    return std::min(d_now + swing, peak) * headroom;
  };
  auto plan_at = [&](double horizon) { return base + std::max(0, for_load(load_within(horizon)) - c_prefill); };
  // Requests can queue for tau - x: capacity that arrives within that slack is in time.
  const double slack = std::max(0.0, tau - x);
  const auto tiers = usable_tiers(cfg, cold_start_s);
  auto edge = [&](std::size_t k) { return k < tiers.size() ? cfg.tiers[tiers[k]].promotion_s : cold_start_s; };
  int active = std::max(base, plan_at(std::max(0.0, edge(0) - slack)));
  int cum = active;
  for (std::size_t k = 0; k < tiers.size(); ++k) {
    const int next = std::max(cum, plan_at(std::max(0.0, edge(k + 1) - slack)));
    out.tiers[tiers[k]] = next - cum;
    cum = next;
  }
  const int margin_replicas = cum - base;

  out.reason_code = "work_demand";
  if (margin_replicas > 0) out.reason_code = "burst_memory";
  else if (headroom > 1 && c_prefill > for_load(d_now)) out.reason_code = "slo_feedback";

  // ---- floors ----------------------------------------------------------------------------
  // A floor on active replicas replaces standby ones first (fastest tier first): the plan's
  // total only grows when the floor exceeds it.
  auto raise_active = [&](int floor_active) {
    int extra = floor_active - active;
    for (std::size_t k = 0; k < tiers.size() && extra > 0; ++k) {
      const int take = std::min(extra, out.tiers[tiers[k]]);
      out.tiers[tiers[k]] -= take;
      extra -= take;
    }
    active = floor_active;
    cum = std::max(cum, active + std::accumulate(out.tiers.begin(), out.tiers.end(), 0));
  };
  std::string floors;
  if (cfg.predictive_period_s > 0 && !st.history.empty() && st.history.front().first <= in.t - cfg.predictive_period_s) {
    // What the demand was one period ago, over the lead time a cold start needs.
    const double from = in.t - cfg.predictive_period_s, to = from + cold_start_s + cfg.slo.ttft_s + kBucketS;
    double then = 0;
    for (const auto& [t, v] : st.history)
      if (t >= from && t <= to) then = std::max(then, v);
    const int c_pred = for_load(then * headroom);
    if (c_pred > active) {
      floors += "; predictive floor " + std::to_string(c_pred) + " (load " + num(then) + " one period ago)";
      raise_active(c_pred);
      out.reason_code = "predictive";
    }
  }
  const double learn = cfg.learn_s > 0 ? cfg.learn_s : std::clamp(15 * cold_start_s, 600.0, 3600.0);
  if (in.t - st.first_t < learn && st.initial_capacity > active) {
    // Too little history to rule out bursts: keep what was running when the scaler started.
    floors += "; learning: holding the starting " + std::to_string(st.initial_capacity) + " for " +
              num(learn - (in.t - st.first_t), 0) + "s more";
    raise_active(st.initial_capacity);
    out.reason_code = "learning";
  }

  out.active = active;
  st.last_active_plan = active;
  st.last_plan = cum;
  out.view.demand = d;
  out.view.service_s = x;
  out.view.burst_margin = load_within(cold_start_s) - d;
  out.view.peak = peak;
  out.view.headroom = headroom;
  out.view.for_demand = base;
  out.view.for_plan = cum;
  out.reason = num(lam_l, 2) + " req/s x " + num(p, 0) + " prompt tokens (" + num(h * 100, 0) + "% cached), " +
               num(x, 3) + " s prefill each = " + num(d_now, 2) + " replicas of load";
  if (headroom > 1)
    out.reason += " x" + num(headroom, 2) + " (TTFT attainment " + num(*out.view.attainment * 100, 2) + "% < " +
                  num(cfg.slo.attainment * 100, 1) + "%)";
  out.reason += " -> " + std::to_string(base) + " for TTFT " + num(cfg.slo.ttft_s, 1) + "s (" + bound + ")";
  if (margin_replicas > 0)
    out.reason += "; burst memory: swings up to peak " + num(peak, 2) + " within the " + num(cold_start_s, 0) +
                  "s cold start -> " + std::to_string(cum);
  for (std::size_t k = 0; k < tiers.size(); ++k)
    if (out.tiers[tiers[k]] > 0)
      out.reason += ", " + std::to_string(out.tiers[tiers[k]]) + " of them " + cfg.tiers[tiers[k]].name;
  out.reason += floors;
  return out;
}

}  // namespace tidegate::scaler::detail
