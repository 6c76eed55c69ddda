// The work model's signals over time and the load now (see demand.h).
#include <algorithm>
#include <cmath>

#include "demand.h"

namespace tidegate::scaler::detail {
namespace {

constexpr double kDemandPrecision = 0.1;  // relative standard error the long window aims for
constexpr double kSizeMemoryS = 900;      // time constant of the prompt-size moments

}  // namespace

void record_signals(const PolicyConfig& cfg, PolicyState& st, const PolicyInput& in) {
  const Signals& s = in.signals;
  const double dt = st.prev_t >= 0 ? std::max(0.0, in.t - st.prev_t) : 1.0;
  if (s.arrivals && s.arrival_prompt_tokens) {
    PolicyState::WorkSample w{in.t, dt, std::max(0.0, *s.arrivals), std::max(0.0, *s.arrival_prompt_tokens),
                              s.prefix_hit_ratio};
    if (s.in_flight && s.ttft_total) {
      w.in_flight_s = std::max(0.0, *s.in_flight) * dt;
      w.admitted = std::max(0.0, *s.ttft_total);
    }
    st.work.push_back(w);
    st.last_work_t = in.t;
    if (s.arrival_prompt_sizes) {
      const double keep = std::exp(-dt / kSizeMemoryS);
      for (int b = 0; b < PromptSizes::kBuckets; ++b)
        st.prompt_sizes[b] = st.prompt_sizes[b] * keep + std::max(0.0, (*s.arrival_prompt_sizes)[b]);
    }
  }
  if (s.ttft_total && *s.ttft_total > 0)
    st.ttft.push_back({in.t, {std::clamp(s.ttft_met.value_or(0), 0.0, *s.ttft_total), *s.ttft_total}});
  const double keep = std::max(kMaxDemandWindowS, cfg.demand_window_s);
  while (!st.work.empty() && st.work.front().t <= in.t - keep) st.work.pop_front();
  while (!st.ttft.empty() && st.ttft.front().first <= in.t - cfg.slo.window_s) st.ttft.pop_front();
}

LoadNow load_now(const PolicyConfig& cfg, PolicyState& st, const Signals& s, double t) {
  double hit_sum = 0;
  int hit_n = 0;
  for (const auto& w : st.work)
    if (w.hit_ratio) hit_sum += *w.hit_ratio, ++hit_n;
  if (hit_n) st.hit_ratio = std::clamp(hit_sum / hit_n, 0.0, 0.99);
  const auto& cap = cfg.capacity;
  const double h = st.hit_ratio;
  // The long window holds at least enough requests to know the load within kDemandPrecision
  // (relative standard error sqrt((1 + cv2) / n) for a compound Poisson sum of service times):
  // heavy-tailed prompt sizes need more of them, so a slow long-context stream is averaged
  // over minutes rather than over a few huge prompts.
  const double cv2_before = prefill_service(cap, h, st.mean_prompt, st.prompt_sizes).cv2;
  const double n_min = (1 + cv2_before) / (kDemandPrecision * kDemandPrecision);
  double long_s = cfg.demand_window_s;
  Window wl = window(st.work, t - long_s);
  while (wl.arrivals < n_min && long_s < kMaxDemandWindowS && wl.span >= long_s - 1) {
    long_s = std::min(kMaxDemandWindowS, long_s * 1.5);
    wl = window(st.work, t - long_s);
  }
  const Window ws = window(st.work, t - cfg.demand_short_window_s);
  if (wl.arrivals > 0) st.mean_prompt = wl.tokens / wl.arrivals;
  const double p = st.mean_prompt;
  // The mean from the recent window (demand now); the spread from the long-run size mix.
  const auto service = prefill_service(cap, h, p, st.prompt_sizes);
  const double x = service.mean;
  const double lam_l = wl.span > 0 ? wl.arrivals / wl.span : 0;
  const double lam_s = ws.span > 0 ? ws.arrivals / ws.span : 0;
  // The short window counts only when it is above the long one by more than its own noise.
  const double short_noise = ws.arrivals > 0 ? std::sqrt((1 + service.cv2) / ws.arrivals) : 1.0;
  // An idle pool (nothing arrived in the short window, nothing in flight or queued) has no
  // load, whatever the long window still remembers: what lets a scale_to_zero pool get there.
  const bool idle = ws.arrivals == 0 && s.in_flight.value_or(0) == 0 && s.queue.value_or(0) == 0 &&
                    s.prefill_backlog_tokens.value_or(0) == 0;
  const double d_now =
      idle ? 0.0 : cfg.headroom * std::max(lam_l * x, lam_s * x * std::max(0.0, 1 - cfg.noise_z * short_noise));
  // Standard error of that load: the window's work has variance (1 + cv2) x d / span; a window
  // not yet full (or one that saw few requests) is noisy.
  const double noise =
      x > 0 && wl.span > 0 ? std::sqrt((1 + service.cv2) * x * std::max(d_now, x / wl.span) / wl.span) : 0;
  return {wl, service, lam_l, d_now, noise, idle};
}

}  // namespace tidegate::scaler::detail
