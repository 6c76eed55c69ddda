#include "tidegate/replay/suite.h"

#include <algorithm>
#include <atomic>
#include <mutex>
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

TunerResult tune(const Trace& trace, const ReplayConfig& base, const TunerGrid& grid, unsigned threads,
                 const std::function<void(std::size_t, std::size_t)>& progress) {
  TunerResult r;
  for (double c : grid.concurrency_per_replica)
    for (double w : grid.stable_window_s)
      for (double s : grid.scale_down_stabilization_s)
        for (int pool : grid.warm_pool_size) {
          TunerPoint p;
          p.config = base.tidegate;
          p.config.policy.targets.concurrency_per_replica = c;
          p.config.policy.stable_window_s = w;
          p.config.policy.panic_window_s = std::min(p.config.policy.panic_window_s, w);
          p.config.policy.scale_down_stabilization_s = s;
          p.config.warm_pool_size = pool;
          r.all.push_back(std::move(p));
        }
  std::atomic<std::size_t> done{0};
  std::mutex progress_mu;
  parallel_for(r.all.size(), threads, [&](std::size_t i) {
    ReplayOptions o = base.options;
    o.progress = {};
    TidegatePolicy policy(r.all[i].config, "tidegate");
    r.all[i].summary = run_replay(trace, policy, o).summary;
    const auto n = ++done;
    if (progress) {
      std::lock_guard lock(progress_mu);
      progress(n, r.all.size());
    }
  });
  std::vector<std::pair<double, double>> pts;
  for (const auto& p : r.all) pts.emplace_back(p.summary.gpu_hours, p.summary.ttft_slo_attainment);
  for (auto i : pareto_frontier(pts)) r.frontier.push_back(r.all[i]);
  for (std::size_t i = 0; i < r.frontier.size(); ++i)
    if (r.frontier[i].summary.meets_slo(base.options.slo)) {
      r.cheapest_meeting_slo = static_cast<int>(i);
      break;
    }
  return r;
}

}  // namespace tidegate::replay
