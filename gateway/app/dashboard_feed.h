#pragma once
// The gateway's own live series for the built-in dashboard (latency percentiles, time to
// first byte, queue depth, scaler desired vs active), kept as fixed-width time buckets.
// The cost library supplies the money series; the data endpoint merges both.
#include <boost/json.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tidegate/gateway/gateway.h"

namespace tidegate::app {

class DashboardFeed final : public gateway::RequestFilter {
 public:
  DashboardFeed(double step_s, std::size_t points) : step_s_(step_s), points_(points) {}

  void on_complete(const gateway::RequestContext& ctx) override;
  bool reads_request_body() const override { return false; }
  bool runs_before_forward() const override { return false; }  // it only watches completions
  // Called about once a step by the housekeeping thread.
  // `prefix_hit_ratio`: "model replica" -> the replica's engine prefix-cache hit ratio.
  // `cache_audit`: line -> value of the cache's audited false-hit rates (cache_audit_lines).
  void sample(double t, const std::map<std::string, double>& queue_depth,
              const std::map<std::string, std::pair<int, int>>& desired_active,
              const std::map<std::string, double>& prefix_hit_ratio = {},
              const std::map<std::string, double>& cache_audit = {});
  // Adds this feed's series into `series` (the cost snapshot's "series" object).
  void add_series(double t, boost::json::object& series);
  double step_s() const { return step_s_; }
  double window_s() const { return step_s_ * static_cast<double>(points_); }

 private:
  // A uniform sample of a bucket's values (Vitter's algorithm R): bounded memory under any load,
  // and percentiles of the whole bucket, not of its first few thousand requests.
  struct Reservoir {
    std::vector<double> values;
    std::uint64_t seen = 0;
  };
  struct Bucket {
    double t0 = 0;
    Reservoir latency_s;
    Reservoir ttfb_s;
    std::map<std::string, double> queue_depth;
    std::map<std::string, std::pair<int, int>> desired_active;
    std::map<std::string, double> prefix_hit_ratio;
    std::map<std::string, double> cache_audit;
  };
  Bucket& bucket_at(double t);  // mu_ held
  void offer(Reservoir& r, double v);  // mu_ held

  const double step_s_;
  const std::size_t points_;
  std::mutex mu_;
  std::deque<Bucket> buckets_;
  std::uint64_t rng_ = 0x9E3779B97F4A7C15ull;  // splitmix64 state, under mu_
};

double unix_now();

// The lines of the dashboard's audit chart from the cache's stats() ("audit" -> "models"): per
// pool "<model> audited" and "<model> upper bound" once audits were judged, "<model> max" when
// the pool has a max_false_hit_rate (issue 19).
std::map<std::string, double> cache_audit_lines(const boost::json::object& cache_stats);

}  // namespace tidegate::app
