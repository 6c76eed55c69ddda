#include "demand.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tidegate::scaler::detail {

Window window(const std::deque<PolicyState::WorkSample>& work, double since) {
  Window w;
  for (const auto& s : work) {
    if (s.t <= since) continue;
    w.span += s.dt;
    w.arrivals += s.arrivals;
    w.tokens += s.tokens;
    w.in_flight_s += s.in_flight_s;
    w.admitted += s.admitted;
  }
  return w;
}

void record_history(const PolicyConfig& cfg, PolicyState& st, double t, double load, double noise,
                    double cold_start_s) {
  if (st.bucket_start < 0) st.bucket_start = t;
  if (t - st.bucket_start >= kBucketS && st.bucket_n > 0) {
    st.history.push_back({st.bucket_start, st.bucket_sum / st.bucket_n, std::sqrt(st.bucket_var / st.bucket_n)});
    st.bucket_start = t;
    st.bucket_sum = st.bucket_var = 0;
    st.bucket_n = 0;
  }
  st.bucket_sum += load;
  st.bucket_var += noise * noise;
  ++st.bucket_n;
  const double keep = std::max(cfg.burst_memory_s, cfg.predictive_period_s + cold_start_s + cfg.slo.ttft_s + kBucketS);
  while (!st.history.empty() && st.history.front().t < t - keep) st.history.pop_front();
}

FirstTokens first_tokens(const std::deque<std::pair<double, std::pair<double, double>>>& ttft, double since) {
  FirstTokens f;
  for (auto it = ttft.rbegin(); it != ttft.rend() && it->first > since; ++it)
    f.met += it->second.first, f.total += it->second.second;
  return f;
}

MissRate miss_rate(const FirstTokens& f, double z) {
  if (!(f.total > 0)) return {};
  const double misses = std::max(0.0, f.total - f.met);
  const double spread = z * std::sqrt(misses + 1);
  return {std::max(0.0, misses - spread) / f.total, (misses + spread) / f.total};
}

void record_held(PolicyState& st, double t, int active, double window_s, bool short_of_slo, double memory_s) {
  st.held.push_back({t, active});
  while (st.held.size() > 1 && st.held.front().first <= t - window_s) st.held.pop_front();
  if (short_of_slo) {
    int fewest = active;
    for (const auto& [when, n] : st.held) fewest = std::min(fewest, n);
    // One entry per fleet size in a row: a burst's window stays short for many calls.
    if (!st.short_fleets.empty() && st.short_fleets.back().second == fewest) st.short_fleets.back().first = t;
    else st.short_fleets.push_back({t, fewest});
  }
  while (!st.short_fleets.empty() && st.short_fleets.front().first <= t - memory_s) st.short_fleets.pop_front();
}

RememberedFleet largest_short_fleet(const PolicyState& st, double t) {
  RememberedFleet out;
  for (const auto& [when, n] : st.short_fleets)
    if (n >= out.replicas) out = {n, t - when, ""};
  return out;
}

void record_hard_need(PolicyState& st, double t, int replicas, const char* bound, double memory_s) {
  if (replicas > 0) {
    // A later need at least as large outlasts every earlier one no larger than it.
    while (!st.hard_needs.empty() && st.hard_needs.back().replicas <= replicas) st.hard_needs.pop_back();
    st.hard_needs.push_back({t, replicas, bound});
  }
  while (!st.hard_needs.empty() && st.hard_needs.front().t <= t - memory_s) st.hard_needs.pop_front();
}

RememberedFleet largest_hard_need(const PolicyState& st, double t) {
  if (st.hard_needs.empty()) return {};
  const auto& largest = st.hard_needs.front();
  return {largest.replicas, t - largest.t, largest.bound};
}

void record_burst(PolicyState& st, double t, bool in_burst, int active, double met, double total,
                  const std::deque<PolicyState::LoadSample>& series, double z, double budget, double tail_s,
                  double memory_s) {
  if (in_burst) {
    if (st.burst_start_t < 0) st.burst_start_t = t, st.burst_fewest = active, st.burst_met = st.burst_total = 0;
    st.burst_below_since = -1;  // a burst that resumes within its tail is the same burst
  } else if (st.burst_start_t >= 0 && st.burst_below_since < 0) {
    st.burst_below_since = t;
  }
  if (st.burst_start_t >= 0) {
    if (in_burst) st.burst_fewest = std::min(st.burst_fewest, active);
    st.burst_met += met, st.burst_total += total;
    if (st.burst_below_since >= 0 && t - st.burst_below_since >= tail_s) {
      double own = 0, largest = 0;
      for (const auto& s : series) {
        const double level = s.load - z * s.noise;
        largest = std::max(largest, level);
        if (s.t >= st.burst_start_t - kBucketS) own = std::max(own, level);
      }
      const auto rate = miss_rate({st.burst_met, st.burst_total}, z);
      if (st.burst_total > 0 && rate.upper <= budget && own >= largest) st.served_t = t, st.served_fleet = st.burst_fewest;
      if (st.burst_total > 0 && rate.lower > budget) st.burst_short_fleet = std::max(st.burst_short_fleet, st.burst_fewest);
      st.bursts.push_back({t, st.burst_total});
      st.burst_spans.push_back({st.burst_start_t, st.burst_below_since});
      st.burst_start_t = st.burst_below_since = -1;
      st.burst_end_t = t;
    }
  }
  while (!st.bursts.empty() && st.bursts.front().first <= t - memory_s) st.bursts.pop_front();
  while (!st.burst_spans.empty() && st.burst_spans.front().second <= t - memory_s) st.burst_spans.pop_front();
  // Kept while bursts go on: one that vouches for nothing smaller leaves the last step standing.
  // So is a burst's shortfall. Bursts of a recurring process differ in size: the memory of their
  // load forgets a large one after burst_memory_s, while smaller ones go on vouching for steps
  // down, and the next large one then meets a fleet below the one it was short with.
  if (st.burst_end_t <= t - memory_s) st.served_t = -1, st.served_fleet = 0, st.burst_short_fleet = 0;
}

RememberedBursts remembered_bursts(const PolicyState& st) {
  RememberedBursts out;
  out.count = static_cast<int>(st.bursts.size());
  for (const auto& [end, first_tokens] : st.bursts) out.most_first_tokens = std::max(out.most_first_tokens, first_tokens);
  return out;
}

RememberedFleet last_burst_served(const PolicyState& st, double t) {
  if (st.served_t < 0 || st.served_fleet <= 0) return {};
  return {st.served_fleet, t - st.served_t, ""};
}

double median_load(const std::deque<PolicyState::LoadSample>& series) {
  if (series.empty()) return 0;
  std::vector<double> v;
  v.reserve(series.size());
  for (const auto& s : series) v.push_back(s.load);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

Episodes episodes(const std::deque<PolicyState::LoadSample>& series, double level) {
  Episodes e;
  double start = -1;
  for (const auto& s : series) {
    if (s.load > level) {
      if (start < 0) start = s.t;
    } else if (start >= 0) {
      e.longest_done = std::max(e.longest_done, s.t - start);
      start = -1;
    }
  }
  if (start >= 0 && !series.empty()) e.current_age = series.back().t - start;
  return e;
}

Service prefill_service(const ReplicaCapacity& cap, double h, double m1, const std::array<double, 24>& sizes) {
  Service out;
  if (!(m1 > 0)) return out;
  const double k1 = (1 - h) / (cap.prefill_tokens_per_s * (1 - cap.overhead));
  const double k2 = cap.attention_context_tokens > 0 ? k1 * (1 + h) / (2 * cap.attention_context_tokens) : 0;
  double n = 0, sum = 0;
  for (int b = 0; b < PromptSizes::kBuckets; ++b) n += sizes[b], sum += sizes[b] * PromptSizes::size_of(b);
  if (!(n > 0) || !(sum > 0)) {
    out.mean = k1 * m1 + k2 * 2 * m1 * m1;
    return out;
  }
  const double scale = m1 / (sum / n);
  double s1 = 0, s2 = 0;
  for (int b = 0; b < PromptSizes::kBuckets; ++b) {
    const double size = PromptSizes::size_of(b) * scale, service = k1 * size + k2 * size * size;
    s1 += sizes[b] * service;
    s2 += sizes[b] * service * service;
  }
  out.mean = s1 / n;
  out.cv2 = std::clamp((s2 / n) / (out.mean * out.mean) - 1, 0.0, 50.0);
  return out;
}

double climb_per_cold_start(const std::deque<PolicyState::LoadSample>& samples, double t, double cold_start_s,
                            double load, double noise, double z) {
  double climb = 0;
  for (int spans = 1; spans <= 4; spans *= 2) {
    const PolicyState::LoadSample* then = nullptr;
    for (auto it = samples.rbegin(); it != samples.rend(); ++it)
      if (it->t <= t - spans * cold_start_s) {
        then = &*it;
        break;
      }
    if (!then) break;
    const double rise = load - then->load;
    if (rise > z * std::hypot(noise, then->noise)) climb = std::max(climb, rise / spans);
  }
  return climb;
}

double largest_swing(const std::deque<PolicyState::LoadSample>& samples, double horizon_s, double z) {
  // Sliding-window max of (load - z noise) and min of (load + z noise), monotone deques: O(n).
  auto hi = [&](std::size_t i) { return samples[i].load - z * samples[i].noise; };
  auto lo = [&](std::size_t i) { return samples[i].load + z * samples[i].noise; };
  std::deque<std::size_t> top, bottom;
  double best = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    while (samples[i].t - samples[start].t > horizon_s) ++start;
    while (!top.empty() && hi(top.back()) <= hi(i)) top.pop_back();
    while (!bottom.empty() && lo(bottom.back()) >= lo(i)) bottom.pop_back();
    top.push_back(i);
    bottom.push_back(i);
    while (top.front() < start) top.pop_front();
    while (bottom.front() < start) bottom.pop_front();
    best = std::max(best, hi(top.front()) - lo(bottom.front()));
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

double routed_share(double promotion_s, double seen_after_s, double slack_s) {
  const double late = std::max(0.0, promotion_s) + std::max(0.0, seen_after_s);
  return late + slack_s <= 0 || slack_s <= 0 ? 1.0 : late / (late + slack_s);
}

}  // namespace tidegate::scaler::detail
