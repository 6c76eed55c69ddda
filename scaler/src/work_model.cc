#include "work_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "binds_now.h"
#include "burst_hold.h"
#include "demand.h"
#include "queueing.h"
#include "quiet_gap.h"
#include "target_tracking.h"

namespace tidegate::scaler::detail {
namespace {

constexpr double kMinTtftSamples = 20; // fewer first tokens in the window: no attainment yet

std::string num(double v, int decimals = 2) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

WorkPlan plan_work(const PolicyConfig& cfg, PolicyState& st, const PolicyInput& in, double cold_start_s) {
  WorkPlan out;
  out.tiers.assign(cfg.tiers.size(), 0);
  const Signals& s = in.signals;
  record_signals(cfg, st, in);

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
  const LoadNow now = load_now(cfg, st, s, in.t);
  const auto& cap = cfg.capacity;
  const Window& wl = now.long_window;
  const Service& service = now.service;
  const double h = st.hit_ratio, p = st.mean_prompt, x = service.mean;
  const double lam_l = now.rate, d_now = now.load, noise = now.noise;
  record_history(cfg, st, in.t, d_now, noise, cold_start_s);

  // ---- SLO loop: measured attainment over the window ------------------------------------
  const auto measured = first_tokens(st.ttft, in.t - cfg.slo.window_s);
  double headroom = 1;
  const double budget = 1 - cfg.slo.attainment;
  // Queueing gets half the miss budget (the other half is for what the steady-state bound does
  // not see: swings, cold starts, restarts) and, when the measurement shows part of the budget
  // unused, that part too: a fleet that misses 0.2% against a 1% budget is over-provisioned.
  // The miss rate is taken at its upper confidence bound (Poisson, noise_z), so a short window
  // with few misses proves nothing and spends nothing.
  double eps = budget / 2;
  // Short of the SLO: the fleet's miss rate is over the budget by more than chance explains.
  // The window's misses are a sample of the rate the fleet runs at; a fleet whose rate is
  // within the budget shows a window a little over it about as often as a little under, and
  // capacity added for that costs a cold start and a stabilisation window the SLO never
  // needed. The same Poisson bound, taken the other way, decides when the budget may be spent.
  auto short_of_budget = [&](const FirstTokens& f) {
    return f.total >= kMinTtftSamples && budget > 0 && miss_rate(f, cfg.noise_z).lower > budget;
  };
  const bool short_of_target = short_of_budget(measured);
  if (measured.total >= kMinTtftSamples) {
    out.view.attainment = measured.met / measured.total;
    if (short_of_target)
      headroom = std::min(cfg.max_headroom,
                          1 + cfg.headroom_gain * std::min(1.0, (cfg.slo.attainment - *out.view.attainment) / budget));
    if (cfg.slo_loop_spends_budget)
      eps = std::clamp(unused_budget(measured, budget, cfg.noise_z), budget / 2, budget);
  }
  eps = std::max(1e-6, eps);
  out.view.queueing_budget = eps;
  const double d = d_now * headroom;
  // The load less its noise (noise_z standard errors of the window's estimate): what a fleet
  // measured to meet the SLO is known to serve (the rules after the plan).
  const double load_less_noise = std::max(0.0, d_now - cfg.noise_z * noise) * headroom;

  // ---- replicas for a load ---------------------------------------------------------------
  const double tau = std::max(0.0, cfg.slo.ttft_s - cap.step_s);  // a request first waits for a step
  const int max_c = std::max(1, cfg.max_replicas) * 4 + 16;
  auto for_load = [&](double load) -> int {
    if (!(load > 0)) return 0;
    if (!(x > 0)) return ceil_count(load);
    return queueing::servers_for(load, tau / x, eps, max_c, service.cv2);
  };
  const int c_prefill = for_load(d);
  int base = c_prefill;
  const auto tiers = usable_tiers(cfg, cold_start_s);
  // Replicas asked for now arrive a cold start from now (a standby tier's promotion, when there
  // is one): work already waiting is drained within that time (or the TTFT budget, if longer).
  const double arrive_s = tiers.empty() ? cold_start_s : cfg.tiers[tiers.front()].promotion_s;
  const double drain_s = std::max(tau, arrive_s);
  // What binds now (binds_now.h): KV, slots, a backlog.
  const auto hard = binds_now(cfg, s, wl,
                              {.now = d_now, .planned = d, .planned_less_noise = load_less_noise, .service_s = x,
                               .prompt_tokens = p, .hit_ratio = h, .tau_s = tau, .drain_s = drain_s});
  std::string bound = "prefill";
  if (hard.kv > base) base = hard.kv, bound = "KV";
  if (hard.slots > base) base = hard.slots, bound = "in-flight slots";
  if (hard.backlog > base) base = hard.backlog, bound = "backlog";

  // ---- burst memory: what a swing within a promotion or cold start would need -----------
  auto series = st.history;
  series.push_back({in.t, d_now, noise});
  double peak = d_now;  // the highest load noise does not explain
  for (const auto& h : series) peak = std::max(peak, h.load - cfg.noise_z * h.noise);
  // What was running when the scaler started is the operator's estimate of the peak: it counts
  // as a burst that may come while the history is too short to say otherwise, and for the
  // whole burst memory when the history shows bursts (within one cold start the load swung by
  // more than its typical level, so a fleet sized for the usual level cannot follow it; a slow
  // daily swing can be followed and is not bursty). The next burst may be larger than the ones
  // seen so far, and a fleet released in a gap cannot come back within it.
  // By default the estimate holds in full for half the burst memory: a burst that recurs
  // within the memory has by then most likely shown itself once.
  const double learn = cfg.learn_s > 0 ? cfg.learn_s : cfg.burst_memory_s / 2;
  const double age = in.t - st.first_t;
  const double slack = std::max(0.0, tau - x);  // how long a request can queue and still make it
  // The history's usual level, and the level that marks a burst in it (a quarter of the way to
  // the peak): one definition for "in a burst" below and for the episodes a burst is timed by.
  const double typical = median_load(series);
  const double burst_level = typical + (peak - typical) / 4;
  const bool bursty =
      series.size() >= 12 && largest_swing(series, std::max(kBucketS, cold_start_s - slack), cfg.noise_z) > typical;
  // Without bursts in the history the estimate fades, linearly over the rest of the burst
  // memory after the learning period: a first burst that comes later meets part of it rather
  // than a fleet sized for the calm (an hour of calm says little about the next ten minutes).
  const double memory = std::max(learn, cfg.burst_memory_s);
  const bool prior = cfg.hold_starting_fleet && age < memory && st.initial_capacity > 0;
  const double fade = bursty || age < learn || memory <= learn ? 1.0 : 1.0 - (age - learn) / (memory - learn);
  // The same test over the last demand window alone: a burst's misses, which the SLO's long
  // window dilutes.
  const bool short_lately = short_of_budget(first_tokens(st.ttft, in.t - cfg.demand_window_s));
  record_held(st, in.t, in.active, cfg.demand_window_s, short_lately, memory);
  const auto ep = episodes(series, burst_level);
  const double tick_total = std::max(0.0, s.ttft_total.value_or(0));  // as record_signals takes them
  // A burst that came while the fleet was out for a quiet gap (quiet_gap.h) met it on its way
  // back: served, it vouches for the fleet coming back, not for the few it began with.
  const int burst_fleet = std::max(in.active, st.gap_released_from);
  record_burst(st, in.t, ep.current_age >= 0, burst_fleet, std::clamp(s.ttft_met.value_or(0), 0.0, tick_total), tick_total,
               series, cfg.noise_z, budget, cfg.demand_window_s, memory);
  // What the requests in the fleet occupy (KV, slots), up to the replicas active: those served
  // the need and were filled; beyond them it is the model's estimate, which the SLO may not have
  // needed. Not a backlog: how fast one must drain is the model's choice, not a state a burst
  // brings back.
  record_hard_need(st, in.t, std::min(hard.occupied(), in.active), hard.occupied_by(), memory);
  double prior_load = 0;  // the largest load the starting fleet serves within the SLO, faded
  if (prior) {
    double lo = 0, hi = static_cast<double>(st.initial_capacity);
    for (int i = 0; i < 40; ++i) {
      const double mid = (lo + hi) / 2;
      (for_load(mid) <= st.initial_capacity ? lo : hi) = mid;
    }
    prior_load = lo * std::clamp(fade, 0.0, 1.0);
  }
  // Load that may arrive within `horizon` seconds: none can before any time has passed.
  auto load_within = [&](double horizon) {
    if (horizon <= 0) return d;
    const double swing = largest_swing(series, std::max(horizon, kBucketS), cfg.noise_z);
    return std::max(std::min(d_now + swing, peak) * headroom, prior ? prior_load : 0.0);
  };
  // What capacity must be in place before more can arrive `p` seconds into a swing: requests
  // that come meanwhile are sent to the replicas there are (and stay in their queues when more
  // arrive), so those must do the swing's first p seconds of work within p + slack. The
  // future needs the load it may reach; what binds now (KV, slots, a backlog) is a state of the
  // present, so the two are not added.
  // After a cold start the fleet must carry the swing's load in full (with its queueing headroom).
  // A swing is seen late: the short demand window's average reaches half a step after half
  // its length, so promotions start that much after the swing does.
  const double seen_after = cfg.demand_short_window_s / 2;
  auto plan_at = [&](double p, bool last) {
    const double share = last ? 1.0 : routed_share(p, seen_after, slack);
    return std::max(base, for_load(d + std::max(0.0, load_within(p) - d) * share));
  };
  auto edge = [&](std::size_t k) { return k < tiers.size() ? cfg.tiers[tiers[k]].promotion_s : cold_start_s; };
  int active = std::max(base, plan_at(edge(0), tiers.empty()));
  int cum = active;
  for (std::size_t k = 0; k < tiers.size(); ++k) {
    const int next = std::max(cum, plan_at(edge(k + 1), k + 1 == tiers.size()));
    out.tiers[tiers[k]] = next - cum;
    cum = next;
  }
  // Standby capacity trades latency for price; while the SLO is being missed, none of it is
  // counted on: the whole plan stays active. Nor once a burst has begun (what is needed now
  // reaches the burst level of the history): the demand windows see a burst seconds late and a
  // step at a time, and each second the fleet runs short of a burst's load leaves work behind
  // that a fleet sized for the burst, busy with the burst itself, drains slowly. The standby
  // was kept for this burst. While the starting fleet is held as a possible burst (the history
  // too short to show one), a climb to the burst level is taken for that burst: the history
  // cannot yet call it one, and waiting until it can leaves the first seconds' work behind.
  const bool short_of_slo = headroom > 1;
  const bool prior_binds = prior && for_load(prior_load) >= cum && cum > base;
  const bool in_burst = (bursty || prior_binds) && peak > typical && base >= for_load(burst_level);
  const bool wake_standby = (short_of_slo || in_burst) && cum > active;
  if (wake_standby) {
    active = cum;
    for (auto& n : out.tiers) n = 0;
  }
  const int margin_replicas = cum - base;

  out.reason_code = "work_demand";
  if (prior_binds) out.reason_code = "learning";
  else if (margin_replicas > 0) out.reason_code = "burst_memory";
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
  if (cfg.predictive_period_s > 0 && !st.history.empty() && st.history.front().t <= in.t - cfg.predictive_period_s) {
    // What the demand was one period ago, over the lead time a cold start needs.
    const double from = in.t - cfg.predictive_period_s, to = from + cold_start_s + cfg.slo.ttft_s + kBucketS;
    double then = 0;
    for (const auto& h : st.history)
      if (h.t >= from && h.t <= to) then = std::max(then, h.load);
    const int c_pred = for_load(then * headroom);
    if (c_pred > active) {
      floors += "; predictive floor " + std::to_string(c_pred) + " (load " + num(then) + " one period ago)";
      raise_active(c_pred);
      out.reason_code = "predictive";
    }
  }
  std::string prior_note;
  if (prior_binds)
    prior_note = std::string("; ") + (age < learn ? "learning" : bursty ? "bursty demand" : "no burst seen yet") +
                 ": holding " + (fade < 1 ? num(fade * 100, 0) + "% of " : std::string()) + "the starting " +
                 std::to_string(st.initial_capacity) + " as a possible burst for " + num(memory - age, 0) + "s more";

  // The rules below hold the plan at `keep` active replicas, fewer than it asks for: each starts
  // nothing on weaker evidence than its own. What is not started leaves the plan's total too.
  auto start_only = [&](int keep, const char* code, const std::string& why) {
    floors += "; not starting " + std::to_string(active - keep) + ": " + why;
    cum -= active - keep;
    active = keep;
    out.reason_code = code;
  };

  // Under bursty demand the held plan already covers the bursts seen; going beyond it while the
  // measured attainment meets the SLO buys nothing the users notice (the miss budget is there to
  // absorb a burst's first seconds) and costs a cold start and a stabilisation window.
  const int held_now = in.active + in.starting;  // what is routed or on its way
  auto measured_text = [&] {
    const double a = *out.view.attainment;
    return num(a * 100, 2) + "%" + (a < cfg.slo.attainment ? ", short by no more than chance" : "");
  };
  if (bursty && active > held_now && held_now >= st.initial_capacity && out.view.attainment && !short_of_target &&
      st.gap_released_from == 0)
    start_only(held_now, "slo_met", "bursty demand, the held " + std::to_string(held_now) + " meet the SLO (" +
                                        measured_text() + ")");

  // While it learns, the policy trusts the starting fleet both ways as long as the fleet is
  // measured to meet the SLO: it does not release it (the prior above), and does not grow past
  // it on the queueing model's prediction alone, only as far as what binds now asks (KV,
  // in-flight slots, a backlog), or on the model once the TTFT attainment falls short. The
  // model's margin for swings is not yet calibrated on this workload, and the measurement is
  // quick to turn: the window is as young as the scaler, so a fleet that is really short shows
  // misses within a few dozen requests.
  // A backlog binds here only on top of the load less its noise: the backlog is measured, the
  // load it would be drained on top of is an estimate, and a fleet measured to meet the SLO
  // serves a load within its noise. Near the fleet's edge any queue otherwise starts replicas
  // (a wave's crest at 12.4 replicas of load on 13, its queue of 20k-token prompts) that arrive
  // a cold start later, after the crest, and leave the attainment where the held fleet had it.
  {
    const int keep = std::max(held_now, hard.all_less_noise());
    const bool measured_ok = out.view.attainment && !short_of_target;
    if (prior && age < learn && measured_ok && active > keep && held_now >= st.initial_capacity && headroom <= 1) {
      start_only(keep, "learning",
                 "learning, the starting " + std::to_string(st.initial_capacity) + " meet the SLO (" + measured_text() +
                     ")" + (hard.all() > keep ? ", and drain the backlog on top of the load less its noise (" +
                                                   num(load_less_noise) + ")"
                                             : std::string()) +
                     (keep > held_now ? "; starting " + std::to_string(keep - held_now) + " for what binds now" : ""));
    }
  }

  // Under smooth demand, once the measurement vouches for the held fleet (enough first tokens,
  // and the upper bound of their miss rate within the budget), the model starts nothing on
  // weaker evidence than that: not for the margin for a swing, nor for a load within its noise
  // (noise_z standard errors) of what the held fleet serves. A load at the edge between two
  // fleet sizes otherwise starts a replica each time its estimate crosses the edge and releases
  // it a stabilisation window later, paying a cold start and a window each time. A load clearly
  // above the edge, and what binds now (KV, slots, a backlog), still start what they need.
  // With a standby tier the plan's margin sleeps there and a wake takes seconds, not a cold
  // start; this rule is not for it (and would keep the starting fleet's standby asleep).
  // Noise does not keep climbing: a load that rose over the last cold starts by more than noise
  // explains is a trend (a daily or hourly ramp), and the measurement vouches only for the load
  // it was earned at. Replicas started now arrive a cold start from now, when a climb that goes
  // on has added another cold start's rise, so the rule holds the fleet no lower than that load
  // needs. A backlog binds on top of the load less its noise, as in the learning rule above.
  const bool vouched =
      measured.total >= kMinTtftSamples && budget > 0 && miss_rate(measured, cfg.noise_z).upper <= budget;
  const double rise = climb_per_cold_start(st.history, in.t, cold_start_s, d_now, noise, cfg.noise_z);
  const double load_held_for = rise > 0 ? (d_now + rise) * headroom : load_less_noise;
  // Nor for misses the window's unused budget absorbs: the SLO is a share of the window's first
  // tokens, not of each minute's. A replica started now serves a cold start from now, and each
  // tick asks again with what has come since, so what counts is whether the misses the model
  // gives the held fleet over one cold start, at the load expected (not less its noise), fit
  // the budget less the misses at their upper bound. At a small pool's few replicas one more is
  // a third or half of the fleet: started for crests the budget absorbed, it cost the smooth
  // six-hour rows 1-12% over the static fleet. In a climb the load paced is the highest it is
  // known to reach: what a cold start of the climb brings, or the crest the history remembers
  // if higher. A climb towards a remembered crest goes on past the cold start, and a start put
  // off there puts off every later one (a six-hour mooncake wave fell from 99.07% to 98.998%
  // when the budget was paced over the next cold start's load alone).
  const double spare = std::max(0.0, unused_budget(measured, budget, cfg.noise_z) * measured.total);
  const double load_paced = rise > 0 ? std::max(load_held_for, peak * headroom) : d;
  const double arrivals_in_a_cold_start = x > 0 ? load_paced / x * cold_start_s : 0;
  const int for_held_load = for_load(load_held_for);
  // servers_within is never above for_load(load_paced), the same servers_for at the eps share.
  const int paced = vouched && x > 0 ? queueing::servers_within(load_paced, tau / x, eps, arrivals_in_a_cold_start,
                                                                spare, max_c, service.cv2)
                                     : for_held_load;
  const int serves = std::max(hard.all_less_noise(), std::min(for_held_load, paced));
  if (!bursty && tiers.empty() && vouched && held_now > 0 && active > std::max(serves, held_now)) {
    const int keep = std::max(serves, held_now);
    std::string why;
    if (keep < for_held_load)  // kept by the budget, not by the model at its share of it
      why = "; at " + num(load_paced) + (rise > 0 ? " (as high as the load climbs)" : "") + " the model gives them " +
            num(arrivals_in_a_cold_start * queueing::queueing_misses(keep, load_paced, tau / x, service.cv2), 0) +
            " late first tokens in a cold start, within the " + num(spare, 0) + " the SLO window has to spare";
    else if (rise > 0)
      why = "; the load climbs " + num(rise) + " a cold start: " + std::to_string(keep) + " for the " +
            num(d_now + rise) + " it reaches by then";
    else
      why = " and serve the load less its noise (" + num(load_less_noise) + ")";
    start_only(keep, "slo_met",
               "smooth demand, the held " + std::to_string(held_now) + " meet the SLO (" + measured_text() + ")" +
                   (base > keep || keep < for_held_load ? why : std::string()));
  }

  // A replica started now serves from a cold start on. Inside a burst that every burst seen
  // so far outlasts by less than that, more replicas would arrive after it has passed: they
  // cost a cold start and an idle stabilisation window, and help nobody.
  if (active > held_now && held_now > 0) {
    if (ep.longest_done > 0 && ep.current_age >= 0 && ep.current_age <= ep.longest_done &&
        ep.current_age + cold_start_s > ep.longest_done) {
      start_only(held_now, "burst_ends_first",
                 "bursts seen last at most " + num(ep.longest_done, 0) + "s, this one " + num(ep.current_age, 0) +
                     "s, a start takes " + num(cold_start_s, 0) + "s");
    }
  }

  // Under bursty demand, what the bursts measured keep (burst_hold.h).
  if (bursty) {
    if (const auto hold = burst_hold(cfg, st, in.t, held_now, measured); hold.replicas > active) {
      floors += hold.why;
      raise_active(hold.replicas);
      out.reason_code = "burst_memory";
    }
  }

  // Under bursty demand whose bursts keep time, the fleet held for the next burst is released
  // in the gap and started again before that burst can come (quiet_gap.h). A standby tier's
  // margin sleeps at its own price already.
  if (bursty && tiers.empty()) {
    const auto step = quiet_gap_step(cfg, st,
                                     {.t = in.t, .cold_start_s = cold_start_s, .window = measured,
                                      .between_bursts = st.burst_start_t < 0 && ep.current_age < 0,
                                      .vouched = vouched, .climbing = rise > 0, .base = base, .planned = active,
                                      .held_now = held_now});
    if (step.released) cum -= active - step.active, active = step.active, out.quiet_gap = true;
    else if (step.active > active) raise_active(step.active);
    if (!step.why.empty()) floors += step.why, out.reason_code = "quiet_gap";
  }

  out.active = active;
  st.last_active_plan = active;
  st.last_plan = cum;
  out.view.demand = d;
  out.view.service_s = x;
  out.view.service_cv2 = service.cv2;
  out.view.burst_margin = load_within(cold_start_s) - d;
  out.view.peak = peak;
  out.view.headroom = headroom;
  out.view.for_demand = base;
  out.view.for_plan = cum;
  out.reason = num(lam_l, 2) + " req/s x " + num(p, 0) + " prompt tokens (" + num(h * 100, 0) + "% cached), " +
               num(x, 3) + " s prefill each (cv2 " + num(service.cv2, 1) + ") = " + num(d_now, 2) + " replicas of load";
  if (headroom > 1)
    out.reason += " x" + num(headroom, 2) + " (TTFT attainment " + num(*out.view.attainment * 100, 2) + "% < " +
                  num(cfg.slo.attainment * 100, 1) + "%)";
  out.reason += " -> " + std::to_string(base) + " for TTFT " + num(cfg.slo.ttft_s, 1) + "s (" + bound;
  if (eps > budget / 2 + 1e-12)
    out.reason += ", queueing may miss " + num(eps * 100, 2) + "%: attainment " + num(*out.view.attainment * 100, 2) +
                  "% leaves budget unused";
  out.reason += ")";
  if (margin_replicas > 0)
    out.reason += "; burst memory: swings up to peak " + num(peak, 2) + " within the " + num(cold_start_s, 0) +
                  "s cold start -> " + std::to_string(cum);
  for (std::size_t k = 0; k < tiers.size(); ++k)
    if (out.tiers[tiers[k]] > 0)
      out.reason += ", " + std::to_string(out.tiers[tiers[k]]) + " of them " + cfg.tiers[tiers[k]].name;
  if (short_of_slo && !tiers.empty()) out.reason += "; SLO missed: no replica left in standby";
  else if (wake_standby)
    out.reason += bursty ? "; in a burst: standby woken"
                         : "; a climb while the starting fleet is held as a possible burst: standby woken";
  out.reason += prior_note + floors;
  return out;
}

}  // namespace tidegate::scaler::detail
