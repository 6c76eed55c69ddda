#include "tidegate/replay/suite.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "tidegate/replay/baselines.h"
#include "tidegate/replay/tidegate_policy.h"

namespace tidegate::replay {
namespace {

// Runs job(i) for i in [0, n) on up to `threads` workers.
void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& job) {
  threads = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(n)));
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        job(i);
      } catch (...) {
        std::lock_guard lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

ReplaySummary run_static(const Trace& trace, const ReplayOptions& options, int n) {
  ReplayOptions o = options;
  o.initial_active = n;
  o.replicas_min = std::min(o.replicas_min, n);
  o.progress = {};
  StaticPolicy policy(n);
  return run_replay(trace, policy, o).summary;
}

}  // namespace

std::vector<ReplayResult> run_all(const Trace& trace, const std::vector<NamedPolicy>& policies,
                                  const ReplayOptions& options, unsigned threads) {
  std::vector<ReplayResult> out(policies.size());
  parallel_for(policies.size(), threads, [&](std::size_t i) {
    ReplayOptions o = options;
    o.progress = {};
    if (policies[i].initial_active > 0) o.initial_active = policies[i].initial_active;
    auto policy = policies[i].make();
    out[i] = run_replay(trace, *policy, o);
    out[i].summary.policy = policies[i].name;
  });
  return out;
}

StaticSearchResult cheapest_static(const Trace& trace, const ReplayOptions& options) {
  StaticSearchResult r;
  int lo = options.replicas_min, hi = options.replicas_max;
  auto meets = [&](int n) {
    auto s = run_static(trace, options, n);
    r.tried.push_back(s);
    if (s.meets_slo(options.slo) && (!r.found || n < r.replicas)) r.found = true, r.replicas = n, r.summary = s;
    return s.meets_slo(options.slo);
  };
  // Doubling first: small fleets are cheap to try and the answer is usually small.
  int probe = lo;
  while (probe < hi && !meets(probe)) {
    lo = probe + 1;
    probe = std::min(hi, probe * 2);
  }
  if (probe == hi && !r.found && !meets(hi)) {
    r.replicas = hi;
    r.summary = r.tried.back();
    return r;
  }
  hi = r.replicas;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (meets(mid)) hi = mid; else lo = mid + 1;
  }
  return r;
}

std::vector<NamedPolicy> comparison_policies(const ReplayConfig& c) {
  std::vector<NamedPolicy> out;
  out.push_back({"hpa", [hpa = c.hpa] { return std::make_unique<HpaPolicy>(hpa); }});
  out.push_back({"kpa", [kpa = c.kpa] { return std::make_unique<KpaPolicy>(kpa); }});
  auto tidegate = c.tidegate;
  const char* primary = tidegate.warm_pool_size > 0 ? "tidegate (warm pool)" : "tidegate (no warm pool)";
  out.push_back({primary, [tidegate] { return std::make_unique<TidegatePolicy>(tidegate, "tidegate"); }});
  auto other = c.tidegate;
  other.warm_pool_size = tidegate.warm_pool_size > 0 ? 0 : std::max(1, c.comparison_warm_pool);
  const char* second = other.warm_pool_size > 0 ? "tidegate (warm pool)" : "tidegate (no warm pool)";
  out.push_back({second, [other] { return std::make_unique<TidegatePolicy>(other, "tidegate"); }});
  return out;
}

std::vector<std::size_t> pareto_frontier(const std::vector<std::pair<double, double>>& pts) {
  std::vector<std::size_t> idx(pts.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  // Cheapest first; among equal cost, best attainment first. A point is on the frontier when
  // its attainment beats every cheaper-or-equal point seen so far.
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    if (pts[a].first != pts[b].first) return pts[a].first < pts[b].first;
    return pts[a].second > pts[b].second;
  });
  std::vector<std::size_t> out;
  double best = -1;
  for (auto i : idx) {
    if (pts[i].second > best) {
      out.push_back(i);
      best = pts[i].second;
    }
  }
  return out;
}

std::string describe(const TidegatePolicyConfig& c) {
  char buf[160];
  const auto& p = c.policy;
  std::snprintf(buf, sizeof buf, "headroom=%g memory=%gs z=%g sd=%s warm=%d", p.headroom, p.burst_memory_s, p.noise_z,
                p.scale_down_stabilization_s ? (std::to_string(static_cast<int>(*p.scale_down_stabilization_s)) + "s").c_str()
                                             : "auto",
                c.warm_pool_size);
  return buf;
}

void annotate(ReplaySummary& s, const ReplaySummary* fixed, const ReplaySummary* optimum) {
  if (fixed && fixed->gpu_hours > 0) s.gpu_hours_vs_static = s.gpu_hours / fixed->gpu_hours;
  if (optimum && optimum->gpu_hours > 0) s.gpu_hours_vs_optimum = s.gpu_hours / optimum->gpu_hours;
}

namespace {

// A part of the trace as a trace of its own (re-based to 0), and the options to replay it
// with: its own cheapest static fleet as the starting fleet, as for any replay.
struct Part {
  Trace trace;
  ReplayOptions options;
  ReplaySummary fixed;
};

Part make_part(const Trace& trace, const ReplayOptions& base, double from, double to) {
  Part p;
  p.trace.format = trace.format;
  p.trace.block_tokens = trace.block_tokens;
  for (const auto& r : trace.requests)
    if (r.arrival_s >= from && r.arrival_s < to) p.trace.requests.push_back(r);
  if (p.trace.requests.empty()) throw std::invalid_argument("tuner: a part of the trace has no requests");
  const double t0 = p.trace.requests.front().arrival_s;
  for (auto& r : p.trace.requests) r.arrival_s -= t0;
  p.options = base;
  p.options.progress = {};
  p.options.initial_active = 0;
  const auto fixed = cheapest_static(p.trace, p.options);
  p.options.initial_active = fixed.replicas;
  p.fixed = fixed.summary;
  return p;
}

}  // namespace

TunerResult tune(const Trace& trace, const ReplayConfig& base, const TunerGrid& grid, unsigned threads,
                 const std::function<void(std::size_t, std::size_t)>& progress) {
  TunerResult r;
  if (!(grid.tune_share > 0.1 && grid.tune_share < 0.95)) throw std::invalid_argument("tuner: tune share must be in (0.1, 0.95)");
  const double end = trace.duration_s() + 1e-6;
  r.tune_until_s = trace.duration_s() * grid.tune_share;
  const Part whole = make_part(trace, base.options, 0, r.tune_until_s);
  const Part first = make_part(trace, base.options, 0, r.tune_until_s / 2);
  const Part second = make_part(trace, base.options, r.tune_until_s / 2, r.tune_until_s);

  for (double h : grid.headroom)
    for (double m : grid.burst_memory_s)
      for (double z : grid.noise_z)
        for (double sd : grid.scale_down_stabilization_s)
          for (int pool : grid.warm_pool_size) {
            TunerPoint p;
            p.config = base.tidegate;
            p.config.record_decisions = false;
            p.config.policy.headroom = h;
            p.config.policy.burst_memory_s = m;
            p.config.policy.noise_z = z;
            if (sd > 0) p.config.policy.scale_down_stabilization_s = sd;
            else p.config.policy.scale_down_stabilization_s.reset();
            p.config.warm_pool_size = pool;
            r.all.push_back(std::move(p));
          }
  std::atomic<std::size_t> done{0};
  std::mutex progress_mu;
  parallel_for(r.all.size(), threads, [&](std::size_t i) {
    auto run_on = [&](const Part& part) {
      TidegatePolicy policy(r.all[i].config, "tidegate");
      return run_replay(part.trace, policy, part.options).summary;
    };
    auto& point = r.all[i];
    point.summary = run_on(whole);
    annotate(point.summary, &whole.fixed, nullptr);
    // The halves are only worth replaying for a point that meets the SLO on the whole part.
    point.robust = point.summary.meets_slo(base.options.slo) && run_on(first).meets_slo(base.options.slo) &&
                   run_on(second).meets_slo(base.options.slo);
    const auto n = ++done;
    if (progress) {
      std::lock_guard lock(progress_mu);
      progress(n, r.all.size());
    }
  });
  std::vector<std::pair<double, double>> pts;
  for (const auto& p : r.all) pts.emplace_back(p.summary.gpu_hours, p.summary.ttft_slo_attainment);
  for (auto i : pareto_frontier(pts)) r.frontier.push_back(r.all[i]);
  for (std::size_t i = 0; i < r.all.size(); ++i)
    if (r.all[i].robust && (r.cheapest_meeting_slo < 0 ||
                            r.all[i].summary.gpu_hours < r.all[static_cast<std::size_t>(r.cheapest_meeting_slo)].summary.gpu_hours))
      r.cheapest_meeting_slo = static_cast<int>(i);

  // Validation on the part the choice never saw.
  if (r.tune_until_s < end) {
    const Part held = make_part(trace, base.options, r.tune_until_s, end);
    r.held_back_static = held.fixed;
    TidegatePolicy untuned(base.tidegate, "tidegate (default)");
    r.held_back_default = run_replay(held.trace, untuned, held.options).summary;
    r.held_back_default->policy = "tidegate (default)";
    annotate(*r.held_back_default, &held.fixed, nullptr);
    if (r.cheapest_meeting_slo >= 0) {
      TidegatePolicy chosen(r.all[static_cast<std::size_t>(r.cheapest_meeting_slo)].config, "tidegate (tuned)");
      r.held_back = run_replay(held.trace, chosen, held.options).summary;
      r.held_back->policy = "tidegate (tuned)";
      annotate(*r.held_back, &held.fixed, nullptr);
    }
  }
  return r;
}

}  // namespace tidegate::replay
