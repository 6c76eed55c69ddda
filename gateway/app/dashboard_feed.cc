#include "dashboard_feed.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

namespace tidegate::app {
namespace {

constexpr std::size_t kMaxSamplesPerBucket = 4096;  // per series and bucket

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

boost::json::value quantile(std::vector<double> v, double q) {
  if (v.empty()) return nullptr;
  const auto k = static_cast<std::size_t>(std::min<double>(v.size() - 1, std::floor(q * v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

boost::json::object series(const char* title, const char* unit, boost::json::object lines) {
  return {{"title", title}, {"unit", unit}, {"stacked", false}, {"lines", std::move(lines)}};
}

}  // namespace

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

DashboardFeed::Bucket& DashboardFeed::bucket_at(double t) {
  const double t0 = std::floor(t / step_s_) * step_s_;
  if (buckets_.empty() || buckets_.back().t0 < t0) {
    buckets_.push_back(Bucket{t0, {}, {}, {}, {}, {}});
    while (buckets_.size() > points_) buckets_.pop_front();
  }
  // A clock step backwards lands in the newest bucket rather than rewriting history.
  return buckets_.back();
}

void DashboardFeed::offer(Reservoir& r, double v) {
  ++r.seen;
  if (r.values.size() < kMaxSamplesPerBucket) {
    r.values.push_back(v);
    return;
  }
  const auto j = splitmix64(rng_) % r.seen;  // keep v with probability capacity / seen
  if (j < kMaxSamplesPerBucket) r.values[static_cast<std::size_t>(j)] = v;
}

void DashboardFeed::on_complete(const gateway::RequestContext& ctx) {
  const double t = unix_now();
  std::lock_guard lock(mu_);
  auto& b = bucket_at(t);
  offer(b.latency_s, ctx.timings.total_s);
  if (ctx.timings.ttfb_s >= 0) offer(b.ttfb_s, ctx.timings.ttfb_s);
}

void DashboardFeed::sample(double t, const std::map<std::string, double>& queue_depth,
                           const std::map<std::string, std::pair<int, int>>& desired_active,
                           const std::map<std::string, double>& prefix_hit_ratio,
                           const std::map<std::string, double>& cache_audit) {
  std::lock_guard lock(mu_);
  auto& b = bucket_at(t);
  b.queue_depth = queue_depth;
  b.desired_active = desired_active;
  b.prefix_hit_ratio = prefix_hit_ratio;
  b.cache_audit = cache_audit;
}

std::map<std::string, double> cache_audit_lines(const boost::json::object& cache_stats) {
  std::map<std::string, double> out;
  const auto* audit = cache_stats.if_contains("audit");
  const auto* models = audit && audit->is_object() ? audit->as_object().if_contains("models") : nullptr;
  if (!models || !models->is_object()) return out;
  for (const auto& [model, v] : models->as_object()) {
    if (!v.is_object()) continue;
    const auto& m = v.as_object();
    const std::string name(model);
    if (const auto* r = m.if_contains("false_hit_rate"); r && r->is_double()) out[name + " audited"] = r->as_double();
    if (const auto* u = m.if_contains("false_hit_rate_upper"); u && u->is_double()) out[name + " upper bound"] = u->as_double();
    if (const auto* b = m.if_contains("max_false_hit_rate"); b && b->is_double()) out[name + " max"] = b->as_double();
  }
  return out;
}

void DashboardFeed::add_series(double t, boost::json::object& out) {
  std::lock_guard lock(mu_);
  // Every series spans the same window as the cost series (one point per step, null where no
  // request finished), so all charts on the page share one time axis.
  const auto now_index = static_cast<std::int64_t>(std::floor(t / step_s_));
  const auto first = now_index - static_cast<std::int64_t>(points_) + 1;
  std::map<std::int64_t, const Bucket*> by_index;
  std::set<std::string> models;
  for (const auto& b : buckets_) {
    by_index[static_cast<std::int64_t>(std::llround(b.t0 / step_s_))] = &b;
    for (const auto& [model, depth] : b.queue_depth) models.insert(model);
  }
  boost::json::array p50, p99, ttfb;
  std::map<std::string, boost::json::array> queue, desired, active, prefix, audit;
  for (auto i = first; i <= now_index; ++i) {
    const double t0 = static_cast<double>(i) * step_s_;
    const auto it = by_index.find(i);
    const Bucket* b = it == by_index.end() ? nullptr : it->second;
    p50.push_back(boost::json::array{t0, b ? quantile(b->latency_s.values, 0.5) : boost::json::value()});
    p99.push_back(boost::json::array{t0, b ? quantile(b->latency_s.values, 0.99) : boost::json::value()});
    ttfb.push_back(boost::json::array{t0, b ? quantile(b->ttfb_s.values, 0.5) : boost::json::value()});
    for (const auto& model : models) {
      boost::json::value depth = nullptr;
      if (b)
        if (const auto q = b->queue_depth.find(model); q != b->queue_depth.end()) depth = q->second;
      queue[model].push_back(boost::json::array{t0, std::move(depth)});
    }
    if (!b) continue;
    for (const auto& [replica, ratio] : b->prefix_hit_ratio) prefix[replica].push_back(boost::json::array{t0, ratio});
    for (const auto& [line, rate] : b->cache_audit) audit[line].push_back(boost::json::array{t0, rate});
    for (const auto& [model, da] : b->desired_active) {
      desired[model].push_back(boost::json::array{t0, da.first});
      active[model].push_back(boost::json::array{t0, da.second});
    }
  }
  out["latency_p50_s"] = series("Latency p50", "s", {{"all", std::move(p50)}});
  out["latency_p99_s"] = series("Latency p99", "s", {{"all", std::move(p99)}});
  out["ttfb_s"] = series("Time to first byte p50", "s", {{"all", std::move(ttfb)}});
  boost::json::object qlines, slines;
  for (auto& [model, pts] : queue) qlines[model] = std::move(pts);
  for (auto& [model, pts] : desired) slines[model + " desired"] = std::move(pts);
  for (auto& [model, pts] : active) slines[model + " active"] = std::move(pts);
  out["queue_depth"] = series("Queue depth", "requests", std::move(qlines));
  if (!slines.empty()) out["scaler_decisions"] = series("Scaler: desired vs active", "replicas", std::move(slines));
  boost::json::object plines;
  for (auto& [replica, pts] : prefix) plines[replica] = std::move(pts);
  if (!plines.empty())
    out["prefix_cache_hit_ratio"] = series("Prefix-cache hit ratio by replica", "ratio", std::move(plines));
  boost::json::object alines;
  for (auto& [line, pts] : audit) alines[line] = std::move(pts);
  if (!alines.empty())
    out["cache_audit_false_hit_rate"] =
        series("Cache: audited false-hit rate vs max_false_hit_rate", "ratio", std::move(alines));
}

}  // namespace tidegate::app
