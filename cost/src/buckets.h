#pragma once
// Time-bucketed aggregates behind report(): fixed-width buckets (default one minute) kept for a
// bounded horizon, so any from/to range sums whole buckets. Costs that span buckets are split
// in proportion to time, so a range report adds up to the bill over the same range.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "tidegate/cost/config.h"

namespace tidegate::cost {

// Counts are integers so reports print them as JSON integers; only money is a double.
struct Agg {
  double cost = 0, savings = 0;
  std::int64_t requests = 0, prompt = 0, completion = 0, hits = 0, hit_tokens = 0;
};

struct Infra {
  double bill = 0, request_usd = 0, idle_usd = 0, standby_usd = 0;
  double active_s = 0, idle_s = 0;  // time active, and active with nothing in flight
  std::int64_t max_warm = 0;        // largest warm pool seen in the bucket
  std::int64_t promotions = 0;      // warm -> active in the bucket (the burst it served)
};

struct Bucket {
  std::unordered_map<std::string, Agg> dims;  // "tenant:acme", "model:llama", "tag:team=ml"
  std::map<std::string, Infra> models;
};

class Buckets final {
 public:
  Buckets(double width_s, double horizon_s) : width_(width_s), horizon_(horizon_s) {}

  Agg& dim(double t, const std::string& key) { return at(t).dims[key]; }
  Infra& infra(double t, const std::string& model) { return at(t).models[model]; }
  // Calls f(bucket, fraction) for every bucket [t0, t1) touches; a point when t1 <= t0.
  template <typename F>
  void spread(double t0, double t1, F&& f) {
    if (t1 <= t0) {
      f(at(t0), 1.0);
      return;
    }
    const double span = t1 - t0;
    for (double a = t0; a < t1;) {
      const auto idx = index(a);
      const double b = std::min(t1, static_cast<double>(idx + 1) * width_);
      f(at(a), (b - a) / span);
      if (b <= a) break;  // float guard
      a = b;
    }
  }
  void prune(double now);
  const std::map<std::int64_t, Bucket>& all() const { return buckets_; }
  double width() const { return width_; }

 private:
  std::int64_t index(double t) const { return static_cast<std::int64_t>(std::floor(t / width_)); }
  Bucket& at(double t) { return buckets_[index(t)]; }

  double width_, horizon_;
  std::map<std::int64_t, Bucket> buckets_;
};

// GET /admin/costs: returns {body, content type}; an unknown `by` or format answers a JSON error
// with content type "application/json" and an "error" member.
std::pair<std::string, std::string> render_report(const Buckets& buckets, const CostConfig& config,
                                                  const std::string& by, double from, double to,
                                                  const std::string& format);

}  // namespace tidegate::cost
